import MagicMirror
import Synchronization

// Sharing in memory, as on the JSON-file database: the grants to a recipient are the
// records of the shared zone itself, and the shared zone's records are read from their
// owners' private zones.

extension InMemoryDatabase: GrantStore {
    /// Shares records of a private zone with a user (see `SharingDatabase`).
    ///
    /// Injected faults apply to the reads and commits of the owner's records it makes, not
    /// to the share itself.
    public func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        try await shareGranting(recordIDs, in: zone, with: recipient, access: access)
    }

    /// Stops sharing records of a private zone with a user (see `SharingDatabase`).
    public func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws {
        try await revokeGranting(of: recordIDs, in: zone, from: recipient)
    }

    /// The shares of a private or shared zone that are in effect (see `SharingDatabase`).
    public func shares(in zone: ZoneID) async throws -> [RecordShare] {
        try await sharesGranted(in: zone)
    }

    package func commitGrants(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try ZoneState.validate(operations, zone: zone)
        return try store.perform(
            operations, to: zone, writer: writerID, databaseIdentifier: identifier, simulated: false
        ).outcome
    }

    package func grantRecords(in zone: ZoneID) async throws -> ChangeSet {
        try zone.validate()
        return store.contents.withLock { contents in
            let state = contents.zones[zone] ?? ZoneState()
            return ChangeSet(records: Array(state.records.values), token: state.token, isComplete: true)
        }
    }

    package func subscribeToGrants(
        of zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        return store.subscribers.add(zone, handler: handler)
    }

    package func sharedZones(of recordType: String) async throws -> [ZoneID] {
        store.contents.withLock { contents in
            contents.zones.keys.filter { $0.scope == .shared && $0.recordType == recordType }
        }.sorted { ($0.user ?? "") < ($1.user ?? "") }
    }
}
