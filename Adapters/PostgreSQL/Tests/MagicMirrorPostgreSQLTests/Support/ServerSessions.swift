import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import PostgresNIO
import Testing

/// Counts and lock waits on the test server, for tests that race sessions.
extension TestServer {
    /// The count `sql` answers (one `int8`) on database `name`, as the superuser.
    static func count(_ sql: PostgresQuery, database name: String) async throws -> Int {
        try await withAdmin(database: name) { client in try await count(sql, with: client) }
    }

    /// Waits until at least `count` sessions of database `name` wait for a lock; records an
    /// issue after a minute.
    static func waitForLockWaits(database name: String, count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let waiting = try await self.count(
                """
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                """, database: name)
            if waiting >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("\(count) sessions never waited for a lock")
    }

    /// Runs `statements` in a transaction that holds the zone's row of `recordType`, starts
    /// `operation` meanwhile and waits until it waits for a lock, then ends the transaction.
    ///
    /// - Returns: The operation, going on.
    static func whileHoldingZone<Value: Sendable>(
        _ recordType: String, database name: String, _ statements: [PostgresQuery],
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Task<Value, any Error> {
        try await withAdmin(database: name) { client in
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query(
                    "SELECT 1 FROM magicmirror.zones WHERE record_type = \(recordType) FOR UPDATE", logger: logger)
                for statement in statements { try await connection.query(statement, logger: logger) }
                let task = Task { try await operation() }
                try await waitForLockWaits(database: name, count: 1)
                return task // the transaction ends now, and the operation goes on
            }
        }
    }
}
