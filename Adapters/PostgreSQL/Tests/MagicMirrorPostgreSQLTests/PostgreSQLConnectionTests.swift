import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import PostgresNIO
import Testing

/// The connections a process holds to a server (one listening connection and a small pool,
/// shared by every database and mirror of the process), and the errors of a connection the
/// server refuses: each names its cause at once instead of waiting for a deadline.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLConnectionTests {
    let zone = ZoneID.public("Todo")

    private func save(_ id: String) -> RecordOperation {
        .save(id, fields: Data(#"{"title":"\#(id)"}"#.utf8), baseVersion: 0, timestamp: .testNow())
    }

    @Test func manyMirrorsOfManyDatabasesShareThreeConnections() async throws {
        try await TestServer.withDatabase { name, opened in
            var databases: [PostgreSQLDatabase] = []
            for _ in 0..<4 { databases.append(try await opened.open(TestServer.url(database: name))) }
            let snapshot = databases
            let mirrors = try await withThrowingTaskGroup(of: Mirror<SampleRecord>.self) { group in
                for index in 0..<200 {
                    group.addTask { try await Mirror<SampleRecord>(database: snapshot[index % snapshot.count]) }
                }
                var mirrors: [Mirror<SampleRecord>] = []
                for try await mirror in group { mirrors.append(mirror) }
                return mirrors
            }
            // Every mirror commits at once: the pool is as busy as it gets.
            for (index, mirror) in mirrors.enumerated() {
                mirror.dataModel.append(SampleRecord(title: "record \(index)"))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for mirror in mirrors { group.addTask { try await mirror.flush() } }
                try await group.waitForAll()
            }
            // Every mirror hears every commit (through the one listening connection).
            for mirror in [mirrors[0], mirrors[101], mirrors[199]] {
                try await mirror.waitUntil(timeout: .seconds(60), "every record") { $0.count == 200 }
            }
            // Once settled: a listening connection being replaced under load may be ending for
            // a moment. A probe of the server (magicmirror-check, opened when a lease waited
            // while the listening connection was down) is not one of the three: it ends on its
            // own, which is waited for below.
            func sessions() async throws -> [String] {
                try await TestServer.withAdmin(database: name) { client in
                    var names: [String] = []
                    for try await (application, state) in try await client.query(
                        """
                        SELECT application_name, coalesce(state, '') FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                        """, logger: TestServer.logger
                    ).decode((String, String).self) { names.append("\(application) (\(state))") }
                    return names
                }
            }
            var names: [String] = []
            // (Shorter than the pool's idle timeout, so that idle connections closing cannot pass it.)
            let settled = ContinuousClock.now + .seconds(5)
            repeat {
                names = try await sessions().filter { !$0.hasPrefix("magicmirror-check") }
                if names.count > 3 { try await Task.sleep(for: .milliseconds(200)) }
            } while names.count > 3 && ContinuousClock.now < settled
            #expect(names.count <= 3, "the process holds \(names.count) sessions: \(names)")
            let probesEnded = ContinuousClock.now + .seconds(60)
            while try await sessions().contains(where: { $0.hasPrefix("magicmirror-check") }), ContinuousClock.now < probesEnded {
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(try await !sessions().contains { $0.hasPrefix("magicmirror-check") }, "a probe of the server stayed open")
            let listening = try await TestServer.count(
                """
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = \(SharedListener.applicationName)
                """, database: name)
            #expect(listening == 1)
            withExtendedLifetime(mirrors) {}
        }
    }

    /// Every database of a process storing assets shares one presence session: a relay
    /// storing for many users does not hold one connection per user.
    @Test func databasesStoringAssetsShareOnePresence() async throws {
        try await TestServer.withDatabase { name, opened in
            var databases: [PostgreSQLDatabase] = []
            for _ in 0..<6 { databases.append(try await opened.open(TestServer.url(database: name))) }
            var assets: [Asset] = []
            for (index, database) in databases.enumerated() {
                assets.append(try await database.storeAsset(Data("asset \(index)".utf8), in: zone))
            }
            let presences = try await TestServer.count(
                """
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = 'magicmirror-assets'
                """, database: name)
            #expect(presences == 1)
            // Each asset stays held for its writer: a collection keeps all six.
            #expect(try await databases[0].removeUnreferencedAssets(in: zone) == 0)
            for (index, asset) in assets.enumerated() {
                var bytes = Data()
                for try await piece in databases[(index + 1) % databases.count].contents(of: asset, in: zone, chunkSize: 1024) {
                    bytes += piece
                }
                #expect(bytes == Data("asset \(index)".utf8))
            }
        }
    }

    @Test func tooManyConnectionsIsReportedAtOnceThenListeningIsRetried() async throws {
        try await TestServer.withDatabase { name, opened in
            let admin = try await opened.open(TestServer.url(database: name))
            try await TestServer.withRoles(["slots"]) { roles in
                let role = roles[0]
                try await alterRole(role, limit: 1)
                // The role's one slot is taken: opening fails at once, in the server's words.
                let held = try await rawConnection(database: name, role: role)
                let refusal = await #expect(throws: MirrorError.self) {
                    _ = try await PostgreSQLDatabase(url: TestServer.url(database: name, role: role), environment: [:])
                }
                try? await held.close()
                #expect(refusal?.kind == .unavailable)
                #expect(refusal?.message.contains("53300") == true, "\(String(describing: refusal))")
                #expect(refusal?.message.contains("too many") == true, "\(String(describing: refusal))")

                // Once the slot is free, it opens; its pool takes the slot, so listening is
                // refused: reported once, with the server's words, and retried until it works.
                let database = try await openRetrying(TestServer.url(database: name, role: role), opened)
                let recorder = ErrorNotificationRecorder { $0.message.contains(database.identifier) }
                defer { recorder.stop() }
                let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
                let subscription = try database.subscribe(to: zone) { continuation.yield($0) }
                defer { subscription.cancel() }
                let errors = try await recorder.waitForErrors(count: 1, timeout: .seconds(60))
                #expect(errors.first?.message.contains("53300") == true, "\(errors)")
                try await alterRole(role, limit: 2)
                try await admin.commit([save("after-slots")], to: zone)
                try await stream.waitUntil(timeout: .seconds(60), "a commit once a slot is free") {
                    $0.recordIDs.contains("after-slots")
                }
                #expect(recorder.count == 1, "reported \(recorder.count) times: \(recorder.errors)")
                await database.close()
            }
        }
    }

    @Test func anUnknownRoleFailsAtOnceNamingTheRole() async throws {
        let role = "nobody_" + UUID().uuidString.prefix(8).lowercased()
        let error = await #expect(throws: MirrorError.self) {
            _ = try await PostgreSQLDatabase(url: TestServer.url(database: "postgres", role: role), environment: [:])
        }
        #expect(error?.kind == .permissionDenied)
        #expect(error?.message.contains("no role \(role)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("does not exist") == true, "\(String(describing: error))")
    }

    @Test func aPortWhereNothingListensFailsAtOnceSayingSo() async throws {
        // A port that was free a moment ago: nothing listens there.
        let port = try freeLoopbackPort()
        let error = await #expect(throws: MirrorError.self) {
            _ = try await PostgreSQLDatabase(url: "postgres://mirror@127.0.0.1:\(port)/postgres?sslmode=disable", environment: [:])
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.message.contains("connection refused by 127.0.0.1:\(port)") == true, "\(String(describing: error))")
    }

    @Test func aServerThatAcceptsAndNeverAnswersFailsAfterTheConnectTimeoutSayingSo() async throws {
        // A socket that listens and never accepts: the kernel completes the handshake, and
        // nothing ever answers the start-up message (as from a hung server).
        let (descriptor, port) = try socketOnFreeLoopbackPort()
        defer { close(descriptor) }
        #expect(listen(descriptor, 16) == 0)
        let error = await #expect(throws: MirrorError.self) {
            _ = try await PostgreSQLDatabase(url: "postgres://mirror@127.0.0.1:\(port)/postgres?sslmode=disable", environment: [:])
        }
        #expect(error?.kind.isTransient == true)
        // postgres-nio's connect timeout or the start-up's deadline, whichever ends first.
        #expect(error?.message.contains("127.0.0.1:\(port)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("no answer") == true, "\(String(describing: error))")
    }

    @Test func aRoleThatMayNotCreateTheSchemaIsToldWhatToDo() async throws {
        try await TestServer.withDatabase { name, _ in
            try await TestServer.withRoles(["newcomer"]) { roles in
                let error = await #expect(throws: MirrorError.self) {
                    _ = try await PostgreSQLDatabase(url: TestServer.url(database: name, role: roles[0]), environment: [:])
                }
                #expect(error?.kind == .permissionDenied)
                #expect(error?.message.contains("permission denied for database \(name)") == true, "\(String(describing: error))")
                #expect(error?.message.contains("GRANT CREATE ON DATABASE \(name) TO \(roles[0])") == true)
                #expect(error?.message.contains("as the role that should own the schema") == true)
            }
        }
    }

    @Test func privateMirrorsFollowTheConnectedRole() async throws {
        try await TestServer.withDatabase { name, opened in
            let admin = try await opened.open(TestServer.url(database: name))
            try await TestServer.withRoles(["owner"]) { roles in
                let role = roles[0]
                let database = try await opened.open(TestServer.url(database: name, role: role))
                let session = UserSession()
                // The default user is the process's account, whose private zone is not the role's.
                #expect(session.user.name != role)
                let wrong = await #expect(throws: MirrorError.self) {
                    try await database.commit(
                        [save("elsewhere")], to: .private("Todo", user: session.user.name))
                }
                #expect(wrong?.message.contains("open private mirrors without a user") == true, "\(String(describing: wrong))")

                // A private mirror without a user is the connected role's, whatever the session says.
                #expect(database.connectedUser?.name == role)
                let mirror = try await Mirror<SampleRecord>(
                    database: database, scope: .private, configuration: MirrorConfiguration(userSession: session))
                mirror.dataModel.append(SampleRecord(title: "mine"))
                try await mirror.flush()
                let stored = try await admin.fetchAll(in: .private(SampleRecord.recordType, user: role)).records
                #expect(stored.count == 1)
                #expect(session.user.name != role)
                let user = try database.makeRoleTheCurrentUser(of: session)
                #expect(user.name == role)
                #expect(session.user.name == role)
                #expect(try database.makeUserSession().user.name == role)
            }
        }
    }

    // MARK: - Helpers

    private func alterRole(_ role: String, limit: Int) async throws {
        _ = try await TestServer.withAdmin { client in
            try await client.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(role) CONNECTION LIMIT \(limit)"), logger: TestServer.logger)
        }
    }

    /// A connection of the test's own as `role`, outside any pool.
    private func rawConnection(database name: String, role: String) async throws -> PostgresConnection {
        let components = URLComponents(string: TestServer.url ?? "")
        let configuration = PostgresConnection.Configuration(
            host: components?.host ?? "127.0.0.1", port: components?.port ?? 5432, username: role, password: nil,
            database: name, tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: TestServer.logger)
    }

    /// Opens `url`, retrying transient failures (a session the server has not ended yet)
    /// for up to a minute.
    private func openRetrying(_ url: String, _ opened: OpenedDatabases) async throws -> PostgreSQLDatabase {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                let database = try await PostgreSQLDatabase(url: url, environment: [:])
                opened.append(database)
                return database
            } catch let error as MirrorError where error.kind.isTransient && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
