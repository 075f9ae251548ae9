import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import PostgresNIO
import Testing

/// Roles, counts and lock waits on the test server, for tests that race sessions.
extension TestServer {
    /// The `int8` that `query` returns, run on database `name` as `role` (the superuser by
    /// default).
    static func count(_ query: PostgresQuery, database name: String, role: String? = nil) async throws -> Int {
        let configuration = try PostgreSQLConnectionURL.configuration(
            from: url(database: name, role: role), environment: [:])
        let client = PostgresClient(configuration: configuration)
        let run = Task { await client.run() }
        defer { run.cancel() }
        var count = 0
        for try await value in try await client.query(query, logger: logger).decode(Int.self) { count = value }
        return count
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

    /// Runs `body` with two login roles made for it (role names are cluster-wide), dropped
    /// after it.
    static func withRoles(_ body: (_ alice: String, _ bob: String) async throws -> Void) async throws {
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(8).lowercased()
        let roles = ["alice_\(suffix)", "bob_\(suffix)"]
        _ = try await withAdmin { client in
            for role in roles {
                try await client.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN"), logger: logger)
            }
        }
        do {
            try await body(roles[0], roles[1])
        } catch {
            await dropRoles(roles)
            throw error
        }
        await dropRoles(roles)
    }

    private static func dropRoles(_ roles: [String]) async {
        _ = try? await withAdmin { client in
            for role in roles {
                _ = try? await client.query(PostgresQuery(unsafeSQL: "DROP ROLE IF EXISTS \(role)"), logger: logger)
            }
        }
    }
}
