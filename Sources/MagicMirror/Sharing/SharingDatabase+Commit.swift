extension SharingDatabase {
    /// Commits a recipient's edits in a shared zone to their owners' records, the way
    /// requirement 6 of ``SharingDatabase`` says: for implementations of
    /// ``RecordDatabase/commit(_:to:)`` given a shared zone.
    ///
    /// It reads the shares in effect (``shares(in:)``), refuses everything they do not
    /// allow, and commits the rest to each owner's private zone (``RecordDatabase/commit(_:to:)``
    /// with a private zone), owner by owner. A database that enforces shares itself (a
    /// server) refuses a forbidden write again there.
    ///
    /// - Parameters:
    ///   - operations: The recipient's saves and deletes, at most one per record.
    ///   - zone: The recipient's shared zone.
    /// - Returns: The result of each operation (as the owner's zone reported it) and the
    ///   shared zone's token afterwards.
    /// - Throws: ``MirrorError/Kind/refused``, with ``MirrorError/nothingStored`` set and
    ///   the refused records in ``MirrorError/recordIDs``, when any operation is not an
    ///   edit of a record shared read-write with the zone's user; nothing is stored then.
    ///   What the reads and commits throw otherwise.
    public func commitSharedEdits(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try MirrorError.beforeStoring { () throws(MirrorError) in
            try RecordOperation.validate(operations, in: zone)
            guard zone.scope == .shared else {
                throw MirrorError(
                    .unsupported, "\(zone) is not a shared zone", recordType: zone.recordType, scope: zone.scope)
            }
        }
        var inEffect = IDMap<RecordShare>()
        for share in try await shares(in: zone) { inEffect[share.recordID] = share }
        var refusals: [(id: String, reason: String)] = []
        var byOwner: [MirrorUser: [(index: Int, operation: RecordOperation)]] = [:]
        for (index, operation) in operations.enumerated() {
            guard let share = inEffect[operation.recordID] else {
                refusals.append((operation.recordID, "not shared with \(zone.user ?? "")"))
                continue
            }
            guard share.access == .readWrite else {
                refusals.append((operation.recordID, "shared read-only by \(share.owner)"))
                continue
            }
            guard case .save = operation.action else {
                refusals.append((operation.recordID, "shared by \(share.owner), who alone deletes it"))
                continue
            }
            byOwner[share.owner, default: []].append((index, operation))
        }
        guard refusals.isEmpty else {
            var error = MirrorError(
                .refused,
                "a shared mirror edits only records shared with it read-write: "
                    + refusals.map { "\(String(reflecting: $0.id)) is \($0.reason)" }.joined(separator: "; ")
                    + " (nothing of the commit was stored)",
                recordIDs: refusals.map(\.id), recordType: zone.recordType, scope: .shared)
            error.nothingStored = true
            throw error
        }
        var results = [CommitOutcome.Result](repeating: .notApplied, count: operations.count)
        for (owner, part) in byOwner.sorted(by: { $0.key.name < $1.key.name }) {
            let outcome = try await commit(part.map(\.operation), to: .private(zone.recordType, user: owner.name))
            for (result, entry) in zip(outcome.results, part) { results[entry.index] = result }
        }
        return CommitOutcome(results: results, token: try await currentToken(in: zone))
    }
}
