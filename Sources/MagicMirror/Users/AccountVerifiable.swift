/// A database that can check by itself whether a user can reach their private scope.
///
/// ``MirrorUser/verifyAccountAuthentication(in:)`` calls ``verifyPrivateScope(of:)`` on a
/// database that conforms; for any other database it asks for a token of the user's
/// private scope instead.
///
/// What "reachable" means is the database's to say, and its documentation says it. For the
/// JSON-file database: the user's directory (`<root>/private/<user>/`) exists or can be
/// made with mode 0700, is owned by the process's user id, and can be read and written.
public protocol AccountVerifiable: RecordDatabase {
    /// Checks that `user` can read and write their private scope in this database.
    ///
    /// It may create what the private scope needs (for example the user's directory), but
    /// no records.
    ///
    /// - Parameter user: The user to check.
    /// - Throws: A ``MirrorError`` that says why the private scope cannot be reached.
    func verifyPrivateScope(of user: MirrorUser) async throws
}
