import Foundation
import HTTPTypes
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import PostgresNIO
import Synchronization

/// The users the relay acts for: per subject, a `PostgreSQLDatabase` (all of them share the
/// process's one pool and one listening connection) whose every transaction runs as the
/// subject's role, provisioned on first use by `magicmirror_relay.provision`.
///
/// State, behind one mutex: `databases`, the database of each subject seen since the relay
/// started. Nothing here needs to survive the relay: a new relay provisions nothing twice
/// (the function returns for a known subject) and opens the databases again.
final class RelayUsers: Sendable {
    let url: String
    let environment: [String: String]
    let connections: Int
    let logger: Logger
    private let databases = Mutex<[String: Task<PostgreSQLDatabase, any Error>]>([:])

    init(url: String, environment: [String: String], connections: Int, logger: Logger) {
        (self.url, self.environment, self.connections, self.logger) = (url, environment, connections, logger)
    }

    /// Opens the relay's first database and refuses a role that could bypass row-level
    /// security.
    ///
    /// - Throws: ``RelayConfiguration/Problem`` for a superuser or `BYPASSRLS` role; a
    ///   `MirrorError` when the server cannot be reached.
    func checkOwnRole() async throws {
        try await RelaySetup.withAdminConnection(url, environment: environment) { connection, logger in
            let rows = try await connection.query(
                "SELECT rolsuper, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = current_user", logger: logger)
            for try await (superuser, bypass) in rows.decode((Bool, Bool).self) where superuser || bypass {
                throw RelayConfiguration.Problem(
                    "the relay's role is a superuser or may bypass row-level security: connect as the role `mirror-relay setup` made")
            }
        }
    }

    /// The database that acts for `subject`, provisioning its role the first time.
    ///
    /// - Throws: A ``RelayFailure`` (403) when the subject cannot be provisioned.
    func database(for subject: String) async throws -> PostgreSQLDatabase {
        let task = databases.withLock { databases in
            if let found = databases[subject] { return found }
            let (url, environment, connections) = (url, environment, connections)
            let task = Task { () throws -> PostgreSQLDatabase in
                let database = try await PostgreSQLDatabase(url: url, environment: environment, maximumConnections: connections)
                do {
                    try await Self.provision(subject, url: url, environment: environment)
                } catch {
                    await database.close()
                    throw error
                }
                return database
            }
            databases[subject] = task
            return task
        }
        do {
            return try await task.value
        } catch {
            databases.withLock { if $0[subject] == task { $0[subject] = nil } }
            throw error
        }
    }

    /// Whether `name` is a user of this relay (a subject it provisioned, in this process or
    /// before): the only users a share may name, so that a share reaches neither the relay's
    /// own role nor a role of the server's, and says nothing of which roles exist.
    func isUser(_ name: String) async throws -> Bool {
        if databases.withLock({ $0[name] != nil }) { return true }
        let found = Mutex(false)
        try await RelaySetup.withAdminConnection(url, environment: environment) { connection, logger in
            for try await _ in try await connection.query(
                "SELECT 1 FROM magicmirror_relay.users WHERE subject = \(name)", logger: logger) {
                found.withLock { $0 = true }
            }
        }
        return found.withLock { $0 }
    }

    private static func provision(_ subject: String, url: String, environment: [String: String]) async throws {
        do {
            try await RelaySetup.withAdminConnection(url, environment: environment) { connection, logger in
                // The function's error comes with its rows: read them.
                for try await _ in try await connection.query("SELECT magicmirror_relay.provision(\(subject))", logger: logger) {}
                // The rows end before the statement's transaction commits; a statement after it
                // on the same connection runs once it has, and checks that the relay is a member
                // of the role. (A pooled session that computed its cached memberships while this
                // grant landed keeps a list without the new role: PostgreSQLActingUser and
                // magicmirror_relay.commit drop that list and set the role again once.)
                var member = false
                for try await (granted) in try await connection.query(
                    "SELECT pg_catalog.pg_has_role(\(subject), 'MEMBER')", logger: logger
                ).decode(Bool.self) { member = granted }
                guard member else {
                    throw RelayFailure(.forbidden, "permissionDenied", "the relay cannot act for this subject: it is not a member of its role")
                }
            }
        } catch let error as PSQLError {
            let message = error.serverInfo?[.message] ?? "the server refused"
            // Only the function's own refusals (and the server's, of a role name) say that
            // the subject cannot be a user; anything else is the server's state, for now.
            guard let state = error.serverInfo?[.sqlState], state == "42501" || state == "42710" || state == "42939" else {
                throw RelayFailure(
                    .serviceUnavailable, "unavailable",
                    "the relay could not provision this user now: \(message); nothing was stored; send the request again",
                    retryAfterSeconds: 1)
            }
            throw RelayFailure(.forbidden, "permissionDenied", "the relay cannot act for this subject: \(message)")
        }
    }

    /// Closes every database.
    func close() async {
        let tasks = databases.withLock { databases in
            defer { databases = [:] }
            return Array(databases.values)
        }
        for task in tasks { await (try? await task.value)?.close() }
    }
}
