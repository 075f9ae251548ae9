import Foundation

// Sharing on the JSON-file database: the grants to a recipient are the records of the
// zone directory `shared/<recipient>/<RecordType>/` (the format of every zone), one per
// shared record id (see ShareGrant); the shared zone's records are read from the owners'
// private zones. See <doc:SharingRecords> for what the file permissions enforce.

extension JSONFileDatabase: GrantStore {
    /// Shares records of a private zone with a user (see ``SharingDatabase``): writes the
    /// grants to `shared/<recipient>/<RecordType>/`.
    ///
    /// - Throws: See ``SharingDatabase/share(_:in:with:access:)``.
    public func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        try await shareGranting(recordIDs, in: zone, with: recipient, access: access)
    }

    /// Stops sharing records of a private zone with a user (see ``SharingDatabase``).
    ///
    /// - Throws: See ``SharingDatabase/revokeShares(of:in:from:)``.
    public func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws {
        try await revokeGranting(of: recordIDs, in: zone, from: recipient)
    }

    /// The shares in effect of a private or shared zone (see ``SharingDatabase``).
    ///
    /// - Throws: See ``SharingDatabase/shares(in:)``.
    public func shares(in zone: ZoneID) async throws -> [RecordShare] {
        try await sharesGranted(in: zone)
    }

    package func commitGrants(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try ZoneState.validate(operations, zone: zone)
        let handle = try MirrorError.beforeStoring { () throws(MirrorError) in try engine.zone(zone) }
        return try await handle.commit(
            operations, durable: options.durability == .durable, compactionThreshold: options.compactionThreshold)
    }

    package func grantRecords(in zone: ZoneID) async throws -> ChangeSet {
        try engine.zone(zone).read { state in
            ChangeSet(records: Array(state.records.values), token: state.token, isComplete: true)
        }
    }

    package func subscribeToGrants(
        of zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try subscribeToStored(zone, handler: handler)
    }

    /// The recipients' directories under `shared/` that hold a zone of `recordType`.
    package func sharedZones(of recordType: String) async throws -> [ZoneID] {
        try NameRules.check(recordType, as: "record type", scope: .shared)
        let shared = directory.appendingPathComponent(JSONFileFormat.sharedDirectory, isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: shared.path) else { return [] }
        return names.sorted().compactMap { name in
            guard (try? MirrorUser(name: name)) != nil else { return nil }
            let zone = ZoneID.shared(recordType, user: name)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: self.directory(of: zone).path, isDirectory: &isDirectory),
                  isDirectory.boolValue
            else { return nil }
            return zone
        }
    }
}
