/// The delete rules' part of a commit, for a ``RelationshipDatabase`` in another package (the
/// PostgreSQL adapter): the planning that ``JSONFileDatabase`` and `InMemoryDatabase` use
/// (`RelationshipPlan`, `LinkedBatch`), so that every database enforces the rules the same
/// way, without the planning types becoming API.
///
/// It is behind `@_spi(DatabaseImplementation)`: import MagicMirror with
/// `@_spi(DatabaseImplementation) import MagicMirror` to use it. A commit that deletes a
/// record of a type that rules target does, under locks that keep every zone involved from
/// changing until it ends:
///
/// 1. lock the zones of ``reachableTypes(from:rules:)`` in the commit's scope space;
/// 2. plan the commit's own operations (``CommitPlan``) against its zone's stored records;
/// 3. read, in the zones of the rules' referring types, the live records that refer to a
///    deleted record (a superset is fine: anything that is not a reference is ignored), and
///    again for the records a cascade rule may delete, until none is new;
/// 4. call ``writes(for:in:rules:writer:live:stored:)`` and store every zone's records as
///    one atomic step, or store nothing when it throws.
@_spi(DatabaseImplementation)
public enum RelationshipEnforcement {
    /// The records one zone stores for a linked commit.
    public struct ZoneWrite: Sendable {
        /// The zone, in the commit's scope space.
        public let zone: ZoneID
        /// The zone's next commits, in order, each its own change (with its own token): in
        /// the commit's zone, the commit's own records, then the rules' changes to the zone;
        /// elsewhere, the rules' changes. Records are one version above the stored ones
        /// (tombstones for deletes); no commit is empty, and a zone with nothing to store
        /// has none.
        public let commits: [[StoredRecord]]
    }

    /// Checks the rules a type declares before they are stored: each one valid and
    /// declared by `referringType`, at most one per field.
    ///
    /// - Parameters:
    ///   - rules: The rules to store.
    ///   - referringType: The record type that declares them.
    /// - Throws: ``MirrorError/Kind/invalidName`` or ``MirrorError/Kind/invalidRecord``,
    ///   marked ``MirrorError/nothingStored``.
    public static func check(_ rules: [StoredDeleteRule], referringType: String) throws(MirrorError) {
        try DeleteRuleSet.check(rules, referringType: referringType)
    }

    /// The record types whose zones a commit to `recordType` may read or change: the
    /// referring types of the rules that target it, and, through cascade rules, of those
    /// that target them; sorted, `recordType` included.
    ///
    /// - Parameters:
    ///   - recordType: The commit's record type.
    ///   - rules: Every rule of the commit's scope space.
    /// - Returns: The record types, `recordType` alone when no rule targets it.
    public static func reachableTypes(from recordType: String, rules: [StoredDeleteRule]) -> [String] {
        RelationshipPlan.reachableTypes(from: recordType, rules: rules)
    }

    /// What a commit to `zone` that stores `produced` writes once the rules are applied: its
    /// own zone's commits first, then each other zone the rules change, by record type.
    ///
    /// - Parameters:
    ///   - produced: The records the commit's operations store, as ``CommitPlan`` made them
    ///     (without its `nil`s).
    ///   - zone: The commit's zone.
    ///   - rules: Every rule of the zone's scope space.
    ///   - writer: The committing database's ``RecordDatabase/writerID``.
    ///   - live: Live records of a record type's zone in the scope space, as stored before the
    ///     commit: at least every one that refers to a record the commit deletes (or that a
    ///     cascade deletes).
    ///   - stored: The record stored now under an id in a zone (a tombstone for a deleted
    ///     record): at least the commit's own records and those `live` returned.
    /// - Returns: The zones' records, to store in one atomic step.
    /// - Throws: ``MirrorError/Kind/refused`` naming the commit's denied records, marked
    ///   ``MirrorError/nothingStored``, when a deny rule holds; nothing may be stored then.
    public static func writes(
        for produced: [StoredRecord], in zone: ZoneID, rules: [StoredDeleteRule], writer: String,
        live: (String) -> [StoredRecord], stored: (ZoneID, String) -> StoredRecord?
    ) throws(MirrorError) -> [ZoneWrite] {
        let changes: [String: [LinkedChange]]
        switch RelationshipPlan(produced, type: zone.recordType, rules: rules, scope: zone.scope, live: live) {
        case .refuse(let error):
            throw error
        case .apply(let planned):
            changes = planned
        }
        // The rules' changes come after the commit's own, by the clock every writer shares.
        let clock = HybridLogicalClock.shared
        clock.observe(latestOf: produced.lazy.map(\.modified))
        let batches = try LinkedBatch.batches(
            of: zone, produced: produced, changes: changes, writer: writer, timestamp: clock.now())
        return batches.map { batch in
            ZoneWrite(zone: batch.zone, commits: batch.commits(stored: { stored(batch.zone, $0) }))
        }
    }
}
