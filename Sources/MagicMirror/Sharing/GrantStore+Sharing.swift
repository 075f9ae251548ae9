import Foundation

// The shared scope of a store that keeps shares as grant records (GrantStore): sharing and
// revoking, and a shared zone's reads, commits and tokens, computed from its grants and
// its owners' private zones.
//
// A shared zone's token is (generation: the grants' sequence, sequence: the sum of the
// sequences of the private zones of the owners its grants name). A change to the grants
// moves the generation; with the grants unchanged the owners are fixed and a change to one
// of their zones moves the sum: both only grow, so the token does. Changes are always
// answered with the complete shared set, which the reader compares with what it holds;
// shared sets are small, and this finds revocations and deletions alike.

extension GrantStore {
    // MARK: Sharing

    package func shareGranting(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        let owner = try Self.owner(of: zone, sharingWith: recipient)
        for id in recordIDs { try NameRules.check(id, as: "record id", scope: .private, recordType: zone.recordType) }
        let stored = try await fetch(recordIDs, in: zone)
        let byID = Dictionary(stored.map { (IDKey($0.id), $0) }, uniquingKeysWith: { first, _ in first })
        let missing = recordIDs.filter { byID[IDKey($0)] == nil }
        guard missing.isEmpty else {
            throw MirrorError(
                .notFound, "cannot share what is not stored: \(Self.list(missing)) of \(owner) "
                    + "\(missing.count == 1 ? "is" : "are") not stored (save the record first; nothing was shared)",
                recordIDs: missing, recordType: zone.recordType, scope: .private)
        }
        let sharedZone = ZoneID.shared(zone.recordType, user: recipient.name)
        try await commitGrantsRetrying(to: sharedZone) { grants in
            var taken: [String] = []
            var operations: [RecordOperation] = []
            for id in Self.distinct(recordIDs) {
                let current = grants[id]
                if let grant = current?.grant, grant.owner != owner {
                    // Another owner's share that still shows a record: taken. One whose
                    // record was deleted (or cannot be read here) is replaced.
                    let theirs = try? await fetch([id], in: .private(zone.recordType, user: grant.owner.name)).first
                    if theirs?.created == grant.created {
                        taken.append(id)
                        continue
                    }
                }
                let record = byID[IDKey(id)]!
                let grant = ShareGrant(owner: owner, access: access, created: record.created)
                guard current?.grant != grant else { continue }
                operations.append(.save(
                    id, fields: grant.encoded(), baseVersion: current?.version ?? 0,
                    timestamp: HybridLogicalClock.shared.now()))
            }
            guard taken.isEmpty else {
                throw MirrorError(
                    .refused,
                    "\(recipient) already has \(Self.list(taken)) of type \(zone.recordType) shared by another user: "
                        + "a shared mirror shows one record per id (nothing was shared)",
                    recordIDs: taken, recordType: zone.recordType, scope: .shared)
            }
            return operations
        }
    }

    package func revokeGranting(
        of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser
    ) async throws {
        let owner = try Self.owner(of: zone, sharingWith: nil)
        for id in recordIDs { try NameRules.check(id, as: "record id", scope: .private, recordType: zone.recordType) }
        let sharedZone = ZoneID.shared(zone.recordType, user: recipient.name)
        try await commitGrantsRetrying(to: sharedZone) { grants in
            Self.distinct(recordIDs).compactMap { id -> RecordOperation? in
                guard let current = grants[id], current.grant?.owner == owner else { return nil }
                return .delete(id, baseVersion: current.version, timestamp: HybridLogicalClock.shared.now())
            }
        }
    }

    package func sharesGranted(in zone: ZoneID) async throws -> [RecordShare] {
        let views: [SharedView]
        switch zone.scope {
        case .shared:
            views = [try await sharedView(of: zone, withRecords: true)]
        case .private:
            let owner = try Self.owner(of: zone, sharingWith: nil)
            var found: [SharedView] = []
            for sharedZone in try await sharedZones(of: zone.recordType) {
                found.append(try await sharedView(of: sharedZone, withRecords: true, owners: [owner]))
            }
            views = found
        case .public:
            throw MirrorError(
                .unsupported, "public records are not shared: every user reads them",
                recordType: zone.recordType, scope: .public)
        }
        return RecordShare.ordered(views.flatMap(\.shares))
    }

    // MARK: The shared zone's records

    package func sharedFetchAll(in zone: ZoneID) async throws -> ChangeSet {
        let view = try await sharedView(of: zone, withRecords: true)
        return ChangeSet(records: view.records, token: view.token, isComplete: true)
    }

    package func sharedFetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        let wanted = Set(recordIDs.map(IDKey.init))
        return try await sharedView(of: zone, withRecords: true).records.filter { wanted.contains(IDKey($0.id)) }
    }

    package func sharedChanges(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        let view = try await sharedView(of: zone, withRecords: true)
        guard view.token != token else { return ChangeSet(records: [], token: token, isComplete: false) }
        return ChangeSet(records: view.records, token: view.token, isComplete: true)
    }

    package func sharedToken(in zone: ZoneID) async throws -> ChangeToken {
        try await sharedView(of: zone, withRecords: false).token
    }

    /// A subscription to a shared zone: to its grants, and to the private zones of the
    /// owners they name.
    package func sharedSubscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        let watch = SharedZoneWatch(store: self, zone: zone, handler: handler)
        try watch.start()
        return MirrorCancellable { watch.cancel() }
    }

    // MARK: Reading grants

    /// What a shared zone shows: its live grants, the records they share, its token.
    package func sharedView(
        of zone: ZoneID, withRecords: Bool, owners: Set<MirrorUser>? = nil
    ) async throws -> SharedView {
        let set = try await grantRecords(in: zone)
        var view = SharedView(recipient: zone.user ?? "", recordType: zone.recordType)
        var byOwner: [MirrorUser: [String]] = [:]
        for record in set.records {
            guard let grant = ShareGrant(record), owners?.contains(grant.owner) ?? true else { continue }
            view.grants[record.id] = grant
            byOwner[grant.owner, default: []].append(record.id)
        }
        var sum = 0
        for (owner, ids) in byOwner.sorted(by: { $0.key.name < $1.key.name }) {
            let ownerZone = ZoneID.private(zone.recordType, user: owner.name)
            // The token before the records: a change in between is pulled again.
            sum += try await currentToken(in: ownerZone).sequence
            guard withRecords else { continue }
            for record in try await fetch(ids, in: ownerZone)
            where view.grants[record.id]?.created == record.created {
                view.records.append(record)
            }
        }
        view.token = ChangeToken(generation: set.token.sequence, sequence: sum)
        return view
    }

    /// Reads a shared zone's grants, asks `plan` for the operations to commit on them, and
    /// commits them; plans again when another writer changed the grants meanwhile.
    private func commitGrantsRetrying(
        to zone: ZoneID,
        _ plan: (IDMap<(grant: ShareGrant?, version: Int)>) async throws -> [RecordOperation]
    ) async throws {
        for _ in 0..<Self.grantCommitAttempts {
            var grants = IDMap<(grant: ShareGrant?, version: Int)>()
            for record in try await grantRecords(in: zone).records {
                grants[record.id] = (ShareGrant(record), record.version)
            }
            let operations = try await plan(grants)
            if operations.isEmpty { return }
            if try await commitGrants(operations, to: zone).isApplied { return }
        }
        throw MirrorError(
            .conflict, "the shares of \(zone) kept changing while this change was made; try again",
            recordType: zone.recordType, scope: .shared)
    }

    /// How often a share or revocation is planned again when other writers keep changing
    /// the same grants.
    private static var grantCommitAttempts: Int { 8 }

    /// The owner of a private zone, checked against the recipient.
    private static func owner(of zone: ZoneID, sharingWith recipient: MirrorUser?) throws -> MirrorUser {
        try zone.validate()
        guard zone.scope == .private, let name = zone.user else {
            throw MirrorError(
                .unsupported, "only private records are shared (by their owner); \(zone) is not private",
                recordType: zone.recordType, scope: zone.scope)
        }
        let owner = try MirrorUser(name: name)
        if let recipient, recipient == owner {
            throw MirrorError(
                .refused, "\(owner) owns the records of \(zone): a record is not shared with its owner",
                recordType: zone.recordType, scope: .private)
        }
        return owner
    }

    private static func distinct(_ ids: [String]) -> [String] {
        var seen = Set<IDKey>()
        return ids.filter { seen.insert(IDKey($0)).inserted }
    }

    private static func list(_ ids: [String]) -> String {
        let shown = ids.prefix(5).map { String(reflecting: $0) }.joined(separator: ", ")
        return ids.count > 5 ? "\(shown), … (\(ids.count) records)" : shown
    }
}

/// What a shared zone shows (see `GrantStore.sharedView(of:withRecords:owners:)`).
package struct SharedView: Sendable {
    let recipient: String
    let recordType: String
    /// The live grants, by shared record id.
    var grants = IDMap<ShareGrant>()
    /// The shared records that are stored (the incarnation shared), when asked for.
    var records: [StoredRecord] = []
    var token = ChangeToken.initial

    init(recipient: String, recordType: String) {
        self.recipient = recipient
        self.recordType = recordType
    }

    /// The shares whose records are stored.
    var shares: [RecordShare] {
        guard let recipient = try? MirrorUser(name: recipient) else { return [] }
        return records.compactMap { record in
            grants[record.id].map {
                RecordShare(recordID: record.id, recordType: recordType, owner: $0.owner, recipient: recipient, access: $0.access)
            }
        }
    }
}
