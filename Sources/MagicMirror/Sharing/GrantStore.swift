/// A database that keeps shares as records of the recipients' shared zones and serves the
/// shared zones from them (``JSONFileDatabase``, MirrorTesting's `InMemoryDatabase`): what
/// the shared scope's logic (`GrantStore+Sharing.swift`) needs of it.
///
/// A shared zone holds grants (``ShareGrant``), one per shared record id; the database's
/// ``RecordDatabase`` methods, given a shared zone, answer with the shared records instead
/// (the `shared…` methods), so these methods reach the grants themselves.
package protocol GrantStore: SharingDatabase {
    /// Commits operations on the grants of a shared zone.
    func commitGrants(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome
    /// Every grant record of a shared zone, with the grants' token.
    func grantRecords(in zone: ZoneID) async throws -> ChangeSet
    /// Calls `handler` for every commit to the grants of a shared zone.
    func subscribeToGrants(
        of zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable
    /// The shared zones of `recordType` that hold grants (or once did), one per recipient.
    func sharedZones(of recordType: String) async throws -> [ZoneID]
}
