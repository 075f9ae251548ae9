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

    /// A function that makes a commit one statement, or `nil`: see ``CommitFunction``.
    public let commitFunction: CommitFunction?

    /// The user the current task acts for, or `nil` for the database's own role.
    @TaskLocal public static var current: PostgreSQLActingUser?

    /// Describes the user to act for.
    ///
    /// - Parameters:
    ///   - role: An existing role the connecting role is a member of.
    ///   - writerID: The writer id commits are stored under, or `nil` for the database's.
    ///   - beforeRole: A statement to run first in each transaction, as the connecting role.
    ///   - commitFunction: A function that commits as `role` in one statement, or `nil`.
    public init(
        role: String, writerID: String? = nil,
        beforeRole: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil,
        commitFunction: CommitFunction? = nil
    ) {
        self.role = role
        self.writerID = writerID
        self.beforeRole = beforeRole
        self.commitFunction = commitFunction
    }

    /// A function of the caller's schema through which a commit of a private or public zone
    /// is one statement, one round trip, in no transaction of its own: called in place of
    /// `BEGIN`, ``beforeRole``, `SET LOCAL ROLE`, `commit_records` and `COMMIT`, so that the
    /// zone's commit lock is held for one statement rather than across round trips.
    ///
    /// It is called as `SELECT * FROM name(arguments…, <commit_records' ten arguments>)` as
    /// the connecting role, and must do what the transaction would: its own checks, then
    /// `set_config('role', …, true)` and `commit_records`, answering `commit_records`' rows.
    /// A row of a kind the adapter does not know (no id, no value) is handed to ``noted``.
    /// When `commit_records` answers that delete rules apply, the commit is made again as a
    /// linked commit, in a transaction that runs ``beforeRole`` (the function must then
    /// have stored nothing).
    public struct CommitFunction: Sendable {
        /// The function's name, schema-qualified (`schema.name`, lowercase letters, digits
        /// and underscores).
        public let name: String
        /// The text arguments passed before `commit_records`' ten.
        public let arguments: [String?]
        /// Called with the kind of each row the adapter does not know.
        public let noted: @Sendable (String) -> Void

        /// `commit_records`' parameters (`p_scope text, …`), which a commit function takes
        /// after its own, their types alone (`text, …`), and the columns of its rows
        /// (`o_kind text, …`), which it returns: as the schema declares them, for the
        /// function's own declaration and grants.
        public static let commitRecords = (
            parameters: CommitSchema.parameters,
            types: CommitSchema.parameterList.map(\.type).joined(separator: ", "),
            columns: CommitSchema.columns)

        /// Describes the function.
        public init(name: String, arguments: [String?], noted: @escaping @Sendable (String) -> Void) {
            precondition(
                name.split(separator: ".", omittingEmptySubsequences: false).count == 2
                    && name.allSatisfy { $0 == "." || $0 == "_" || ("a"..."z").contains($0) || ("0"..."9").contains($0) },
                "a commit function's name is schema.name in lowercase letters, digits and underscores")
            (self.name, self.arguments, self.noted) = (name, arguments, noted)
        }
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
