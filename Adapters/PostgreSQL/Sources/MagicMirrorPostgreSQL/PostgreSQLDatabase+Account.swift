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
            (current, readable, writable) = try await client.withConnection { connection in
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
