import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import PostgresNIO
import Testing

/// The `magicmirror` schema's migrations: a database made by an older version of the
/// package is brought up to date in place, and its records keep working.
@Suite(.enabled(if: TestServer.isAvailable, TestServer.skipMessage))
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
            #expect(PostgreSQLDatabase.schemaVersion == 5)
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
}
