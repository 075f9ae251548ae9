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
    /// ``beforeRole`` and sets the role (see ``transaction(on:begin:logger:_:)``).
    func wrap<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result, logger: Logger,
        begin: PostgresQuery = "BEGIN"
    ) -> @Sendable (PostgresConnection) async throws -> Result {
        { [self] connection in
            try await transaction(on: connection, begin: begin, logger: logger) { try await body($0) }
        }
    }

    /// Runs `body` on `connection` in a transaction that `begin` starts, after ``beforeRole``
    /// and `SET LOCAL ROLE`; `COMMIT` when it returns, `ROLLBACK` when it throws.
    ///
    /// When the server refuses the role (SQLSTATE `42501`), before `body` ran, the session's
    /// cached memberships are dropped (``forgetMemberships``) and, for a user without
    /// ``beforeRole``, the transaction runs once more on the same connection; a second
    /// refusal is the membership's state now. With ``beforeRole`` the refusal is thrown (its
    /// caller may keep state across the transactions of a request, as the relay's
    /// idempotency key, recorded once per request, does), and the request's own retry finds
    /// the session's memberships computed again.
    ///
    /// > Important: A PostgreSQL session caches the list of roles its role is a member of
    /// > (`roles_is_member_of` in `acl.c`), and keeps as current a list that it computed while
    /// > it read the invalidation of a `GRANT` made meanwhile (each of its catalog scans takes
    /// > a lock, which reads the invalidations that arrived): `SET ROLE` to the role just
    /// > granted is then refused in that session, in every later transaction, until another
    /// > change of `pg_authid` or `pg_auth_members` arrives, while new sessions are let in. A
    /// > process that grants roles as users come (`mirror-relay`, whose role is a member of
    /// > every user's) meets it under load on its pooled sessions. The server gives no
    /// > stronger guarantee, so the refusal is retried once, after the cache is dropped; a
    /// > retry without it would be refused again.
    ///
    /// - Throws: `unavailable` (nothing stored) when the server refuses the role (twice, or
    ///   once with ``beforeRole``); whatever ``beforeRole`` and `body` throw.
    func transaction<Result>(
        on connection: PostgresConnection, begin: PostgresQuery = "BEGIN", logger: Logger,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var retried = false
        while true {
            do {
                return try await connection.transaction(begin, logger: logger) {
                    try await enterOrRefuse(on: connection, logger: logger)
                    return try await body(connection)
                }
            } catch let refusal as RoleRefusal {
                guard !retried else { throw refusal.error(role: role) }
                retried = true
                do {
                    for try await _ in try await connection.query(forgetMemberships, logger: logger) {}
                } catch {
                    throw refusal.error(role: role)
                }
                guard beforeRole == nil else { throw refusal.error(role: role) }
            }
        }
    }

    /// Runs ``beforeRole`` and sets the role, first in a transaction that the caller began:
    /// for a transaction that does not go through ``transaction(on:begin:logger:_:)`` (an
    /// asset's upload, whose chunks are read as they are stored), which is not run again.
    ///
    /// - Throws: `unavailable` (nothing stored) when the server refuses the role.
    func enter(on connection: PostgresConnection, logger: Logger) async throws {
        do {
            try await enterOrRefuse(on: connection, logger: logger)
        } catch let refusal as RoleRefusal {
            throw refusal.error(role: role)
        }
    }

    /// Runs ``beforeRole`` and sets the role.
    ///
    /// - Throws: ``RoleRefusal`` when the server refuses the role.
    private func enterOrRefuse(on connection: PostgresConnection, logger: Logger) async throws {
        try await beforeRole?(connection, logger)
        do {
            try await connection.query(setRole, logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42501" {
            throw RoleRefusal(underlying: error)
        }
    }

    /// A statement that drops the session's cached memberships of the connecting role: it
    /// computes those of `role` instead (as `pg_has_role(role, session_user, …)`), in the one
    /// slot that `SET ROLE` reads (`MEMBER` up to PostgreSQL 15, `SET` from 16), so that the
    /// next `SET ROLE` computes the connecting role's again, from the catalog as it is.
    var forgetMemberships: PostgresQuery {
        var binds = PostgresBindings()
        binds.append(role)
        return PostgresQuery(unsafeSQL: "SELECT " + Self.forgetMemberships(of: "$1"), binds: binds)
    }

    /// The SQL expression of ``forgetMemberships`` for the role that `roleExpression` names
    /// (a parameter, or a plpgsql variable: the relay's commit function runs it too).
    public static func forgetMemberships(of roleExpression: String) -> String {
        """
        pg_catalog.pg_has_role((\(roleExpression))::name, session_user,
            CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000 THEN 'SET' ELSE 'MEMBER' END)
        """
    }

    /// The server refused `SET ROLE` (SQLSTATE `42501`): the connecting role is not a member
    /// of the role in this session, now.
    struct RoleRefusal: Error {
        let underlying: PSQLError

        /// The refusal as the caller sees it: transient, nothing done (a membership taken
        /// away for good keeps failing, with the server's words).
        func error(role: String) -> MirrorError {
            var refused = MirrorError(
                .unavailable,
                "the server did not let this process act as \(role) now (\(underlying.serverInfo?[.message] ?? "42501")); "
                    + "nothing was done; try again",
                underlying: underlying)
            refused.nothingStored = true
            return refused
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
