import Foundation
@testable import MagicMirrorPostgreSQL
import PostgresNIO

extension TestServer {
    /// Login roles made for one test (role names are cluster-wide), named `<prefix>_<suffix>`
    /// with one random suffix, dropped after `body`.
    static func withRoles(
        _ prefixes: [String], _ body: (_ roles: [String]) async throws -> Void
    ) async throws {
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(8).lowercased()
        let roles = prefixes.map { "\($0)_\(suffix)" }
        _ = try await withAdmin { client in
            for role in roles {
                try await client.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN"), logger: logger)
            }
        }
        do {
            try await body(roles)
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

    /// A client connected to database `name` as `role`, for SQL sent straight at the tables;
    /// runs until `body` returns.
    static func withClient<Result: Sendable>(
        database name: String, role: String, _ body: (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let configuration = try PostgreSQLConnectionURL.configuration(
            from: url(database: name, role: role), environment: [:])
        let client = PostgresClient(configuration: configuration)
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await body(client)
    }

    /// The count the query `sql` answers (one `int8`), run by `client`.
    static func count(_ sql: PostgresQuery, with client: PostgresClient) async throws -> Int {
        var found = -1
        for try await value in try await client.query(sql, logger: logger).decode(Int.self) { found = value }
        return found
    }
}
