import Foundation

/// The in-memory state of one zone and the rules every ``RecordDatabase`` applies to it:
/// versions, conflicts, idempotent retries, atomic commits, tokens and change sets.
///
/// Both shipped databases keep one per zone (the JSON-file database rebuilds it from the
/// snapshot and journal), so the semantics the conformance suite checks live in one place.
/// Not thread-safe: the owner guards it.
package struct ZoneState: Sendable {
    /// Every record of the current generation, tombstones included.
    package private(set) var records: IDMap<StoredRecord> = [:]
    /// The ids changed by each sequence number after `baseSequence`, in order. A record
    /// changed more than once is in several entries; ``changes(since:)`` lists it once, at
    /// its last change, found when reading: a table of each record's last sequence number,
    /// kept up to date by every commit, was a fifth of the time of applying a large commit.
    private var log: [(sequence: Int, ids: [String])] = []
    /// The token of the state.
    package private(set) var token: ChangeToken
    /// The sequence the generation started at (its snapshot's last sequence).
    package private(set) var baseSequence: Int

    /// An empty zone, or one that starts from a snapshot of live records.
    package init(generation: Int = 0, sequence: Int = 0, records: [StoredRecord] = []) {
        token = ChangeToken(generation: generation, sequence: sequence)
        baseSequence = sequence
        if let table = IDMap(ids: records.map(\.id), values: records) {
            self.records = table
            return
        }
        // An id listed twice: the later record wins.
        self.records.reserveCapacity(records.count)
        for record in records { self.records[record.id] = record }
    }

    /// The live records, in no particular order. Without tombstones, the table's own array
    /// (shared, not copied).
    package var liveRecords: [StoredRecord] {
        hasTombstones ? records.values.filter { !$0.isDeleted } : records.values
    }

    /// Every live record as a complete change set (see ``RecordDatabase/fetchAll(in:)``).
    /// Without tombstones it carries the state's table (``ChangeSet/recordsByID``), which a
    /// mirror keeps instead of building its own copy: opening a large zone then holds one
    /// table, until the zone or the mirror changes a record (copy on write).
    package var completeChangeSet: ChangeSet {
        hasTombstones
            ? ChangeSet(records: liveRecords, token: token, isComplete: true)
            : ChangeSet(complete: records, token: token)
    }

    /// Whether some record is a tombstone.
    private var hasTombstones: Bool { records.values.contains { $0.isDeleted } }

    /// Number of live records.
    package var liveCount: Int { records.values.reduce(0) { $0 + ($1.isDeleted ? 0 : 1) } }

    /// Checks every operation against the state without changing it.
    ///
    /// - Returns: The stored records the operations would produce when every one applies
    ///   (`records` — each `nil` for an idempotent retry, which stores nothing), or the
    ///   conflict outcome.
    package func prepare(
        _ operations: [RecordOperation], writer: String
    ) -> Result<[StoredRecord?], CommitConflict> {
        if operations.count >= Self.operationsCheckedInParallel, let produced = storedInParallel(operations, writer: writer) {
            return .success(produced)
        }
        switch CommitPlan(operations, writer: writer, stored: { records[$0] }) {
        case .apply(let produced):
            return .success(produced)
        case .refuse(let results):
            return .failure(CommitConflict(outcome: CommitOutcome(results: results, token: token)))
        }
    }

    /// The records a large commit stores, decided in parallel parts
    /// (``CommitPlan/decide(_:writer:current:)`` for each operation), when every operation
    /// stores one; `nil` when one is a retry or a conflict, which ``CommitPlan`` then decides
    /// in order, with the whole commit's results. (In order, a 100,000-record commit spent
    /// about a tenth of its time here, on one core.)
    private func storedInParallel(_ operations: [RecordOperation], writer: String) -> [StoredRecord?]? {
        let produced = BatchJSONCoding.inParallelParts(operations.count, state: {}) { _, index -> StoredRecord? in
            let operation = operations[index]
            guard case .store(let record) = CommitPlan.decide(
                operation, writer: writer, current: records[operation.recordID])
            else { return nil }
            return record
        }
        return produced.contains(where: { $0 == nil }) ? nil : produced
    }

    /// Makes room in the record table for `count` records, so that applying many commits
    /// one after another (a journal read on open) grows it once, to its size: growing
    /// commit by commit doubles it, and can leave room for up to twice as many records.
    package mutating func reserveCapacity(_ count: Int) {
        records.reserveCapacity(count)
    }

    /// Applies one committed change (a new record state) as the next sequence number.
    /// Used for changes this process commits and for changes read from other writers.
    ///
    /// - Parameter sequence: The change's sequence number; must be greater than the token's.
    package mutating func apply(_ changed: [StoredRecord], sequence: Int) {
        guard !changed.isEmpty else {
            token.sequence = max(token.sequence, sequence)
            return
        }
        var ids: [String] = []
        ids.reserveCapacity(changed.count)
        // One table growth for a large batch instead of one per doubling.
        records.reserveCapacity(records.count + changed.count)
        for record in changed {
            Self.store(record, over: &records[record.id])
            ids.append(record.id)
        }
        log.append((sequence, ids))
        token.sequence = sequence
    }

    /// Puts `record` in the place of `stored` (one table lookup for both). Changes read
    /// from a journal do not carry their creation clock: it is derived from `stored`.
    private static func store(_ record: StoredRecord, over stored: inout StoredRecord?) {
        var record = record
        record.created = created(after: stored, at: record.modified)
        stored = record
    }

    /// The creation clock of a record saved at `timestamp` over `stored`: carried over from a
    /// live record, `timestamp` when the record did not exist or was deleted.
    package static func created(after stored: StoredRecord?, at timestamp: HLCTimestamp) -> HLCTimestamp {
        guard let stored, !stored.isDeleted else { return timestamp }
        return stored.created
    }

    /// Starts a new generation from the current state: drops tombstones and history.
    package mutating func compact(toGeneration generation: Int) {
        records = records.filter { !$0.isDeleted }
        log.removeAll(keepingCapacity: false)
        baseSequence = token.sequence
        token.generation = generation
    }

    /// The outcome of a commit that applied `produced` from `operations`.
    package func outcome(for prepared: [StoredRecord?], of operations: [RecordOperation]) -> CommitOutcome {
        var results: [CommitOutcome.Result] = []
        results.reserveCapacity(prepared.count)
        for (index, record) in prepared.enumerated() {
            if let record {
                results.append(.applied(record))
            } else if let stored = records[operations[index].recordID] {
                results.append(.applied(stored))
            }
        }
        return CommitOutcome(results: results, token: token)
    }

    /// The changes after `since` (see ``RecordDatabase/changes(in:since:)``).
    package func changes(since: ChangeToken) -> ChangeSet {
        guard since.generation == token.generation, since.sequence >= baseSequence,
              since.sequence <= token.sequence
        else {
            return ChangeSet(records: liveRecords, token: token, isComplete: true)
        }
        // Binary search for the first log entry after `since`.
        var low = 0
        var high = log.count
        while low < high {
            let middle = (low + high) / 2
            if log[middle].sequence <= since.sequence { low = middle + 1 } else { high = middle }
        }
        let entries = log[low...]
        var changed: [StoredRecord] = []
        if entries.count == 1, let entry = entries.first {
            // One commit (the usual pull), which names each record once.
            changed.reserveCapacity(entry.ids.count)
            for id in entry.ids {
                if let record = records[id] { changed.append(record) }
            }
        } else {
            // Each record once, at its last change: the first time it is met walking back.
            var seen = IDSet()
            for entry in entries.reversed() {
                for id in entry.ids.reversed() where seen.insert(id).inserted {
                    if let record = records[id] { changed.append(record) }
                }
            }
            changed.reverse()
        }
        return ChangeSet(records: changed, token: token, isComplete: false)
    }

    /// The live records among `ids`.
    package func fetch(_ ids: [String]) -> [StoredRecord] {
        ids.compactMap { id in
            guard let record = records[id], !record.isDeleted else { return nil }
            return record
        }
    }

    /// Groups changed records into notifications, at most one per reason.
    package func notifications(
        for changed: [StoredRecord], databaseIdentifier: String, zone: ZoneID, writer: String?
    ) -> [RemoteNotification] {
        RemoteNotification.grouping(
            changed, databaseIdentifier: databaseIdentifier, zone: zone, token: token, writer: writer)
    }

    /// Validates operations before they are prepared: record ids, distinct ids, fields
    /// that are JSON objects.
    package static func validate(_ operations: [RecordOperation], zone: ZoneID) throws(MirrorError) {
        try MirrorError.beforeStoring { () throws(MirrorError) in try check(operations, zone: zone) }
    }

    /// From this many operations, a commit is checked in parallel parts first.
    package static let operationsCheckedInParallel = 2 * BatchJSONCoding.recordsPerParallelPart

    private static func check(_ operations: [RecordOperation], zone: ZoneID) throws(MirrorError) {
        try zone.validate()
        // A large commit is checked in parallel first; only when that finds a problem is it
        // checked again, in order, below, so the error is the one a check in order meets first.
        if operations.count >= operationsCheckedInParallel, passes(operations) { return }
        var seen = IDSet()
        seen.reserveCapacity(operations.count)
        for operation in operations {
            try NameRules.check(
                operation.recordID, as: "record id", scope: zone.scope, recordType: zone.recordType)
            guard seen.insert(operation.recordID).inserted else {
                throw MirrorError(
                    .invalidRecord, "a commit names record \(operation.recordID) more than once",
                    recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
            }
            if case .save(let fields) = operation.action, !JSONShape.isObject(fields) {
                throw MirrorError(
                    .invalidRecord, "the fields of record \(operation.recordID) are not a JSON object",
                    recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
            }
        }
    }

    /// Whether every operation passes the checks that need no other operation and no two
    /// name the same record, found in parallel parts (each operation's own checks, a scan of
    /// every byte of its fields, and the hash of its id), then through the ids' hashes: an
    /// open-addressing table of positions, at most half full, where only ids with equal
    /// hashes are compared. (A set of 100,000 ids, each retained going in and released when
    /// it is freed, took longer than all the other checks together.)
    private static func passes(_ operations: [RecordOperation]) -> Bool {
        let hashes = BatchJSONCoding.inParallelParts(operations.count, state: {}) { _, index -> Int? in
            isValidAlone(operations[index]) ? IDKey(operations[index].recordID).hashValue : nil
        }
        var slotCount = 8
        while slotCount < 2 * operations.count { slotCount *= 2 }
        let mask = slotCount - 1
        var slots = [Int](repeating: -1, count: slotCount)
        for (index, hash) in hashes.enumerated() {
            guard let hash else { return false }
            var slot = hash & mask
            while slots[slot] >= 0 {
                let other = slots[slot]
                if hashes[other] == hash, IDKey.same(operations[other].recordID, operations[index].recordID) {
                    return false
                }
                slot = (slot + 1) & mask
            }
            slots[slot] = index
        }
        return true
    }

    /// Whether `operation` passes the checks that need no other operation: a valid record
    /// id, and fields that are one JSON object.
    private static func isValidAlone(_ operation: RecordOperation) -> Bool {
        guard NameRules.problem(with: operation.recordID) == nil else { return false }
        if case .save(let fields) = operation.action { return JSONShape.isObject(fields) }
        return true
    }
}
