import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Synchronization
import Testing

/// The throwaway server `Scripts/with-postgres.sh` started, and a fresh database on it for
/// each test.
enum TestServer {
    /// The superuser URL of the server, from `MAGICMIRROR_POSTGRES_URL`.
    static let url = ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_URL"]

    /// Whether a server is there; tests are skipped with this message otherwise.
    static var isAvailable: Bool { url != nil }
    static let skipMessage: Comment =
        "no PostgreSQL server: run under Adapters/PostgreSQL/Scripts/with-postgres.sh (as .ci/run does)"

    static let logger = Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The URL of database `name` on the server, as `role`.
    static func url(database name: String, role: String? = nil) -> String {
        var components = URLComponents(string: url ?? "postgres://localhost/postgres")!
        components.path = "/" + name
        if let role { components.user = role }
        // The test server speaks no TLS: asking for none spares every client loading the
        // system's trust roots.
        components.queryItems = [URLQueryItem(name: "sslmode", value: "disable")]
        return components.string!
    }

    /// Runs `body` with a client connected as the superuser to database `name`.
    static func withAdmin<Result: Sendable>(
        database name: String = "postgres", _ body: (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let configuration = try PostgreSQLConnectionURL.configuration(
            from: url(database: name), environment: [:])
        let client = PostgresClient(configuration: configuration)
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await body(client)
    }

    /// Creates an empty database; its name is made here of hex digits only.
    static func makeDatabase() async throws -> String {
        let name = "mm_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try await withAdmin { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        return name
    }

    /// Drops a database made by ``makeDatabase()``, closing its connections.
    static func dropDatabase(_ name: String) async {
        _ = try? await withAdmin { client in
            try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
        }
    }

    /// A fresh database for a conformance check.
    static func databaseUnderTest() async throws -> DatabaseUnderTest {
        let name = try await makeDatabase()
        let database = try await PostgreSQLDatabase(url: url(database: name), environment: [:])
        let others = OpenedDatabases()
        return DatabaseUnderTest(
            database: database,
            otherWriter: {
                let other = try await PostgreSQLDatabase(url: url(database: name), environment: [:])
                others.append(other)
                return other
            },
            startNewGeneration: { zone in try await database.compactHistory(of: zone) },
            cleanup: {
                await database.close()
                for other in others.all { await other.close() }
                await dropDatabase(name)
            })
    }
}

/// Databases a test opened, closed at its end.
final class OpenedDatabases: Sendable {
    private let opened = Mutex<[PostgreSQLDatabase]>([])
    func append(_ database: PostgreSQLDatabase) { opened.withLock { $0.append(database) } }
    var all: [PostgreSQLDatabase] { opened.withLock { $0 } }
}

extension HLCTimestamp {
    /// A clock reading for a test's operation: the wall clock, and a random counter so that
    /// two readings of one millisecond differ.
    static func testNow() -> HLCTimestamp {
        HLCTimestamp(
            millis: Int64(Date().timeIntervalSince1970 * 1000), counter: UInt32.random(in: 0...UInt32.max / 2))
    }
}

extension TestServer {
    /// Runs `body` with a fresh database on the shared server, and the databases it opens
    /// there; closes them and drops the database afterwards whatever happens.
    static func withDatabase<Result: Sendable>(
        _ body: (_ name: String, _ opened: OpenedDatabases) async throws -> Result
    ) async throws -> Result {
        let name = try await makeDatabase()
        let opened = OpenedDatabases()
        do {
            let result = try await body(name, opened)
            for database in opened.all { await database.close() }
            await dropDatabase(name)
            return result
        } catch {
            for database in opened.all { await database.close() }
            await dropDatabase(name)
            throw error
        }
    }
}

extension OpenedDatabases {
    /// Opens a database from `url` and keeps it to be closed at the end of the test.
    func open(_ url: String) async throws -> PostgreSQLDatabase {
        let database = try await PostgreSQLDatabase(url: url, environment: [:])
        append(database)
        return database
    }
}

extension TestServer {
    /// Writes record `id` of the public zone of `recordType` straight into the tables, as a
    /// writer with SQL access and no MagicMirror would: no version check, no NOTIFY, writer
    /// `outsider`. The zone must exist.
    static func plant(_ id: String, fields: String, recordType: String, with client: PostgresClient) async throws {
        try await client.query(
            """
            WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                 zone AS (UPDATE magicmirror.zones SET last_seq = (SELECT seq FROM drawn)
                          WHERE scope = 'public' AND record_type = \(recordType) RETURNING zone_id)
            INSERT INTO magicmirror.records
                (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq,
                 created_millis, created_counter)
            SELECT zone_id, 'public', '', \(id), 1, convert_to(\(fields), 'UTF8'), 1, 0,
                   'outsider', (SELECT seq FROM drawn), 1, 0 FROM zone
            """, logger: logger)
    }
}
