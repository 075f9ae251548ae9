import Foundation
import MagicMirror
import PostgresNIO

extension PostgreSQLDatabase {
    /// Checks that `user` can reach their private scope: the database connects as the role
    /// of that name, and the server lets it read and write its private rows.
    ///
    /// A private zone belongs to the role whose name is its user, so a user's private scope
    /// is reachable only through a connection as that role. The check asks the server
    /// (`has_table_privilege`) rather than trusting the client, and writes nothing.
    ///
    /// - Parameter user: The user to check.
    /// - Throws: ``MirrorError/Kind/accountUnavailable`` when the database connects as
    ///   another role; ``MirrorError/Kind/permissionDenied`` when the role lacks a grant;
    ///   ``MirrorError/Kind/unavailable`` when the server cannot be reached.
    public func verifyPrivateScope(of user: MirrorUser) async throws {
        try ZoneID.private("Any", user: user.name).validate()
        let logger = logger
        let (current, readable, writable): (String, Bool, Bool)
        do {
            (current, readable, writable) = try await link.withConnection { connection in
                let rows = try await connection.query(
                    """
                    SELECT current_user::text,
                           has_table_privilege('magicmirror.records', 'SELECT'),
                           has_table_privilege('magicmirror.records', 'INSERT')
                             AND has_column_privilege('magicmirror.records', 'fields', 'UPDATE')
                             AND has_column_privilege('magicmirror.zones', 'record_type', 'INSERT')
                    """, logger: logger)
                for try await row in rows.decode((String, Bool, Bool).self) { return row }
                throw MirrorError(.unavailable, "the server answered no row")
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "checking the private scope of \(user.name)")
        }
        guard current == user.name else {
            throw MirrorError(
                .accountUnavailable,
                "this database connects as role \(current), so it cannot reach the private scope of "
                    + "\(user.name): connect as role \(user.name)", scope: .private)
        }
        guard readable, writable else {
            throw MirrorError(
                .permissionDenied, "role \(current) may not read and write magicmirror.records",
                scope: .private)
        }
    }
}

extension PostgreSQLDatabase {
    /// The user whose private zones this database reads and writes: the one named after
    /// ``role``.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for a role whose name is no valid user name.
    public func roleUser() throws -> MirrorUser {
        try MirrorUser(name: role)
    }

    /// Makes this database's role the current user of `session`, for code of yours that
    /// reads the session (to show who is signed in, say).
    ///
    /// Mirrors need no such call: a private or shared mirror opened on this database without
    /// a `user:` is the role's (``connectedUser``), whatever the session says.
    ///
    /// - Parameter session: The session; ``UserSession/shared`` by default.
    /// - Returns: The role's user.
    /// - Throws: ``MirrorError/Kind/invalidName`` for a role whose name is no valid user name.
    @discardableResult
    public func makeRoleTheCurrentUser(of session: UserSession = .shared) throws -> MirrorUser {
        let user = try roleUser()
        _ = session.switchUser(to: user)
        return user
    }

    /// A new session whose current user is this database's role, for mirrors that should
    /// follow it rather than ``UserSession/shared``
    /// (`MirrorConfiguration(userSession: database.makeUserSession())`).
    ///
    /// - Parameter notificationCenter: Where the session posts its user switches.
    /// - Throws: ``MirrorError/Kind/invalidName`` for a role whose name is no valid user name.
    public func makeUserSession(notificationCenter: NotificationCenter = .default) throws -> UserSession {
        UserSession(user: try roleUser(), notificationCenter: notificationCenter)
    }

    /// `error`, with what to do when it is the refusal of another user's private zone.
    func explainingOtherUsersZone(_ error: MirrorError, _ zone: ZoneID) -> MirrorError {
        // A relay's request: the user is the one it acts for, and the relay's own role is
        // none of the client's business.
        let role = PostgreSQLActingUser.current?.role ?? role
        guard error.kind == .permissionDenied, zone.scope == .private, let user = zone.user, user != role else {
            return error
        }
        var explained = error
        if PostgreSQLActingUser.current != nil {
            explained.message = "\(role) may not write zone \(zone): it is user \(user)'s private zone, and a private "
                + "zone is its own user's only"
            return explained
        }
        explained.message += ". The zone belongs to user \(user), but this database connects as role \(role), "
            + "and a private zone is its own role's only: open private mirrors without a user (they are then "
            + "the connected role's) or for user \(role), or connect as \(user)"
        return explained
    }
}
