import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Testing

/// The `magicmirror` schema's migrations: a database made by an older version of the
/// package is brought up to date in place, and its records keep working.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLSchemaTests {
    let zone = ZoneID.public("Todo")

    /// A version-1 database (no creation clock) gets one on open: the clock of each record's
    /// last change; later edits keep it.
    @Test func aVersionOneDatabaseIsMigratedAndItsRecordsGetACreationClock() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await TestServer.withAdmin(database: name) { client in
                try await client.withTransaction(logger: TestServer.logger) { connection in
                    for statement in PostgreSQLSchema.migrations[0] {
                        try await connection.query(statement, logger: TestServer.logger)
                    }
                    try await connection.query(
                        """
                        WITH next AS (SELECT nextval('magicmirror.change_seq') AS seq),
                             zone AS (INSERT INTO magicmirror.zones (scope, owner, record_type, generation, last_seq)
                                      SELECT 'public', '', 'Todo', 1, seq FROM next RETURNING zone_id, last_seq)
                        INSERT INTO magicmirror.records
                            (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq)
                        SELECT zone_id, 'public', '', 'old', 1, convert_to('{"v":1}', 'UTF8'), 1000, 7, 'v1', last_seq
                        FROM zone
                        """, logger: TestServer.logger)
                }
            }
            let database = try await opened.open(TestServer.url(database: name))
            let version = try await TestServer.withAdmin(database: name) { client in
                var found = 0
                for try await value in try await client.query(
                    "SELECT schema_version FROM magicmirror.meta", logger: TestServer.logger
                ).decode(Int.self) {
                    found = value
                }
                return found
            }
            #expect(version == PostgreSQLDatabase.schemaVersion)
            #expect(PostgreSQLDatabase.schemaVersion == 10)
            let old = try #require(try await database.fetch(["old"], in: zone).first)
            let clock = HLCTimestamp(millis: 1000, counter: 7)
            #expect(old.created == clock)
            let edit = RecordOperation.save("old", fields: Data(#"{"v":2}"#.utf8), baseVersion: 1, timestamp: .testNow())
            #expect(try await database.commit([edit], to: zone).isApplied)
            #expect(try await database.fetch(["old"], in: zone).first?.created == clock)
            // Opening it again finds it up to date.
            let again = try await opened.open(TestServer.url(database: name))
            #expect(try await again.fetch(["old"], in: zone).first?.created == clock)
        }
    }

    /// A version-5 database (the version before the server placed rows by their zone), with
    /// a row another role planted in a private zone as version 5 allowed: the migration
    /// deletes the planted row, keeps the rest, gives every zone its own notification key,
    /// and the database then works as a new one.
    @Test func aVersionFiveDatabaseIsMigratedAndLosesOnlyWhatMagicMirrorDidNotWrite() async throws {
        try await TestServer.withDatabase { name, opened in
            try await TestServer.withRoles(["alice"]) { roles in
                let alice = roles[0]
                _ = try await TestServer.withAdmin(database: name) { client in
                    try await client.withTransaction(logger: TestServer.logger) { connection in
                        for step in PostgreSQLSchema.migrations[..<5] {
                            for statement in step { try await connection.query(statement, logger: TestServer.logger) }
                        }
                        try await connection.query("UPDATE magicmirror.meta SET schema_version = 5", logger: TestServer.logger)
                        try await connection.query(
                            """
                            INSERT INTO magicmirror.zones (zone_id, scope, owner, record_type, generation, last_seq)
                            VALUES (1, 'private', \(alice), 'Item', 1, 2), (2, 'public', '', 'Item', 1, 3)
                            """, logger: TestServer.logger)
                        try await connection.query(
                            """
                            INSERT INTO magicmirror.records
                                (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer,
                                 seq, created_millis, created_counter)
                            VALUES (1, 'private', \(alice), 'secret', 1, '\\x7b7d'::bytea, 1000, 0, 'v5', 1, 1000, 0),
                                   (1, 'public', '', 'planted-by-bob', 1, '\\x7b7d'::bytea, 1000, 0, 'bob', 2, 1000, 0),
                                   (2, 'public', '', 'p1', 1, '\\x7b7d'::bytea, 1000, 0, 'v5', 3, 1000, 0)
                            """, logger: TestServer.logger)
                        try await connection.query(
                            "SELECT setval('magicmirror.change_seq', 3)", logger: TestServer.logger)
                        try await connection.query(
                            "SELECT setval('magicmirror.zones_zone_id_seq', 2)", logger: TestServer.logger)
                    }
                }
                _ = try await opened.open(TestServer.url(database: name))
                let (version, keys) = try await TestServer.withAdmin(database: name) { client in
                    (try await TestServer.count("SELECT schema_version::int8 FROM magicmirror.meta", with: client),
                     try await TestServer.count("SELECT count(DISTINCT notify_key)::int8 FROM magicmirror.zones", with: client))
                }
                #expect(version == PostgreSQLDatabase.schemaVersion)
                #expect(keys == 2)
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let alicesZone = ZoneID.private("Item", user: alice)
                #expect(try await asAlice.fetchAll(in: alicesZone).records.map(\.id) == ["secret"])
                #expect(try await asAlice.fetchAll(in: .public("Item")).records.map(\.id) == ["p1"])
                // Commits and notifications work on the migrated zones.
                let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
                let subscription = try asAlice.subscribe(to: alicesZone) { continuation.yield($0) }
                defer { subscription.cancel() }
                let other = try await opened.open(TestServer.url(database: name, role: alice))
                let edit = RecordOperation.save("secret", fields: Data(#"{"v":2}"#.utf8), baseVersion: 1, timestamp: .testNow())
                #expect(try await other.commit([edit], to: alicesZone).isApplied)
                try await stream.waitUntil(timeout: .seconds(30), "the edit") { $0.recordIDs.contains("secret") }
                #expect(try await asAlice.fetch(["secret"], in: alicesZone).first?.version == 2)
            }
        }
    }

    /// A version-6 database (commits in two statements, zones read whole), with records and
    /// a commit made the version-6 way: the migration adds the commit function and the index
    /// of pages, and the zone's history carries on (a token from before reads the changes
    /// since).
    @Test func aVersionSixDatabaseIsMigratedAndCarriesOn() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await TestServer.withAdmin(database: name) { client in
                try await client.withTransaction(logger: TestServer.logger) { connection in
                    for step in PostgreSQLSchema.migrations[..<6] {
                        for statement in step { try await connection.query(statement, logger: TestServer.logger) }
                    }
                    try await connection.query("UPDATE magicmirror.meta SET schema_version = 6", logger: TestServer.logger)
                    try await connection.query(
                        "INSERT INTO magicmirror.zones (scope, owner, record_type, generation) VALUES ('public', '', 'Todo', 0)",
                        logger: TestServer.logger)
                    // A commit as version 6 wrote it: a drawn number, the zone's sequence, the rows.
                    try await connection.query(
                        """
                        WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                             zone AS (UPDATE magicmirror.zones SET last_seq = (SELECT seq FROM drawn)
                                      WHERE record_type = 'Todo' RETURNING zone_id)
                        INSERT INTO magicmirror.records
                            (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq,
                             created_millis, created_counter)
                        SELECT zone_id, 'public', '', id, 1, convert_to('{"v":1}', 'UTF8'), 1000, 0, 'v6',
                               (SELECT seq FROM drawn), 1000, 0
                        FROM zone, unnest(ARRAY['a', 'b']) AS id
                        """, logger: TestServer.logger)
                }
            }
            let version6Token = try await TestServer.withAdmin(database: name) { client in
                ChangeToken(
                    generation: try await TestServer.count("SELECT generation FROM magicmirror.zones", with: client),
                    sequence: try await TestServer.count("SELECT last_seq FROM magicmirror.zones", with: client))
            }
            let database = try await opened.open(TestServer.url(database: name))
            let (version, functions, indexes) = try await TestServer.withAdmin(database: name) { client in
                (try await TestServer.count("SELECT schema_version::int8 FROM magicmirror.meta", with: client),
                 try await TestServer.count(
                    "SELECT count(*)::int8 FROM pg_proc WHERE proname = 'commit_records' AND NOT prosecdef", with: client),
                 try await TestServer.count(
                    """
                    SELECT count(*)::int8 FROM pg_indexes WHERE schemaname = 'magicmirror'
                    AND indexname IN ('records_by_seq_id', 'records_by_seq')
                    """, with: client))
            }
            #expect(version == PostgreSQLDatabase.schemaVersion)
            #expect(functions == 1)
            #expect(indexes == 1)
            #expect(try await database.currentToken(in: zone) == version6Token)
            #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["a", "b"])
            let edit = RecordOperation.save("a", fields: Data(#"{"v":2}"#.utf8), baseVersion: 1, timestamp: .testNow())
            #expect(try await database.commit([edit], to: zone).isApplied)
            let stale = RecordOperation.save("b", fields: Data(#"{"v":2}"#.utf8), baseVersion: 0, timestamp: .testNow())
            #expect(try await database.commit([stale], to: zone).results.first == .conflict(
                current: try await database.fetch(["b"], in: zone).first))
            let since = try await database.changes(in: zone, since: version6Token)
            #expect(!since.isComplete)
            #expect(since.records.map(\.id) == ["a"])
        }
    }
}
