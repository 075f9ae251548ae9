import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// The user a process that serves many users (`mirror-relay`) acts for in the current task:
/// every statement a ``PostgreSQLDatabase`` sends for that task runs in a transaction that
/// begins with `SET LOCAL ROLE`, so that the schema's row-level security, which reads
/// `current_user`, decides what the user may read and write, unchanged.
///
/// The role is only ever set for one transaction (`SET LOCAL`), never for the session, so a
/// pooled connection goes back to the pool as the process's own role. The process's role
/// must be a member of `role` (PostgreSQL refuses `SET ROLE` otherwise).
///
/// Not API: for `mirror-relay`, which sets it with `$current.withValue(_:operation:)` around
/// each request. Reads and commits of the database honour it; tasks the database starts
/// inherit it from the task that starts them (a subscription's pulls run as the user who
/// subscribed first).
@_spi(Relay) public struct PostgreSQLActingUser: Sendable {
    /// The role the transactions run as; quoted as an identifier.
    public let role: String
    /// The writer id commits are stored under instead of the database's own, or `nil`.
    public let writerID: String?
    /// Runs first in each transaction, as the process's own role, before `SET LOCAL ROLE`
    /// (for example to record a commit's idempotency key in the commit's transaction).
    public let beforeRole: (@Sendable (PostgresConnection, Logger) async throws -> Void)?

    /// The user the current task acts for, or `nil` for the database's own role.
    @TaskLocal public static var current: PostgreSQLActingUser?

    /// Describes the user to act for.
    ///
    /// - Parameters:
    ///   - role: An existing role the connecting role is a member of.
    ///   - writerID: The writer id commits are stored under, or `nil` for the database's.
    ///   - beforeRole: A statement to run first in each transaction, as the connecting role.
    public init(
        role: String, writerID: String? = nil,
        beforeRole: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil
    ) {
        self.role = role
        self.writerID = writerID
        self.beforeRole = beforeRole
    }

    /// `SET LOCAL ROLE "<role>"`, the role quoted as an identifier (`"` doubled).
    var setRole: PostgresQuery {
        PostgresQuery(unsafeSQL: "SET LOCAL ROLE \"" + role.replacingOccurrences(of: "\"", with: "\"\"") + "\"")
    }

    /// `body` in a transaction of its own, which `begin` starts, that first runs
    /// ``beforeRole`` and sets the role.
    func wrap<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result, logger: Logger,
        begin: PostgresQuery = "BEGIN"
    ) -> @Sendable (PostgresConnection) async throws -> Result {
        { [self] connection in
            try await connection.transaction(begin, logger: logger) {
                try await enter(on: connection, logger: logger)
                return try await body(connection)
            }
        }
    }

    /// Runs ``beforeRole`` and sets the role, first in a transaction that the caller began:
    /// for a transaction that does not go through ``wrap(_:logger:begin:)``.
    func enter(on connection: PostgresConnection, logger: Logger) async throws {
        try await beforeRole?(connection, logger)
        do {
            try await connection.query(setRole, logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42501" {
            // The connecting role is not a member of `role` for this session, now: a role
            // just granted (mirror-relay provisions its users as they come) was seen refused
            // for a moment by a pooled session under load. Transient: the caller tries again;
            // a membership taken away for good keeps failing, with the server's words.
            var refused = MirrorError(
                .unavailable,
                "the server did not let this process act as \(role) now (\(error.serverInfo?[.message] ?? "42501")); "
                    + "nothing was done; try again",
                underlying: error)
            refused.nothingStored = true
            throw refused
        }
    }
}

@_spi(Relay) extension PostgresClient.Configuration {
    /// The configuration a connection URL names, read as ``PostgreSQLDatabase/init(url:environment:maximumConnections:)``
    /// reads it (for `mirror-relay`'s own connections).
    ///
    /// - Throws: `unsupportedFormat` for a malformed URL or one that carries a password.
    public init(magicMirrorURL url: String, environment: [String: String]) throws {
        self = try PostgreSQLConnectionURL.configuration(from: url, environment: environment)
    }
}
