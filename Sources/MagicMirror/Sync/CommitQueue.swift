/// A mirror's local changes on their way to the database: one ``PendingEntry`` per record,
/// sent in order, in batches, one batch at a time; a failed batch is retried with backoff,
/// and a batch that fails as a whole without naming its bad record is sent again one
/// change at a time to find it.
///
/// A value type with no locks: ``SyncEngine`` holds one and reports what it decides.
struct CommitQueue<Record: Recordable>: Sendable {
    /// How many changes the next batch may hold.
    enum BatchSize: Sendable, Equatable {
        /// Up to the configuration's ``MirrorConfiguration/maximumBatchSize``.
        case full
        /// One at a time, for the next `remaining` successful commits: a batch failed as a
        /// whole and its error did not say which change was bad.
        case isolating(remaining: Int)
    }

    /// What a failed commit did to its batch.
    enum FailureHandling: Equatable {
        /// Cancelled: the batch waits again, nothing to report.
        case requeued
        /// Transient: the batch is retried after a backoff; `oldest` is its oldest change.
        case retrying(oldest: Int)
        /// The batch is sent again one change at a time, to find the bad one; nothing to
        /// report yet.
        case isolating
        /// The bad changes are on hold; `oldest` is the oldest of them.
        case held(oldest: Int)
    }

    /// Items before this many consumed ones are dropped from the order's storage, once they
    /// are also more than half of it.
    static var orderCompactionThreshold: Int { 1024 }

    /// Entries waiting to be sent, by record id.
    private(set) var pending: IDMap<PendingEntry<Record>> = [:]
    /// Entries being committed right now, by record id.
    private(set) var inFlight: IDMap<PendingEntry<Record>> = [:]
    /// The order to send pending entries in; items whose number no longer matches their
    /// entry are skipped.
    private var order: [(id: String, number: Int)] = []
    private var orderHead = 0
    private var nextNumber = 0
    /// The first sequence of every entry in `pending` or `inFlight` (and of some gone).
    private var sequences = OldestSequences()
    private(set) var backoff = RetryBackoff()
    private(set) var batchSize = BatchSize.full
    let maximumBatchSize: Int

    init(maximumBatchSize: Int) {
        self.maximumBatchSize = max(1, maximumBatchSize)
    }

    /// Whether any change waits or is being committed.
    var isEmpty: Bool { pending.isEmpty && inFlight.isEmpty }

    /// Whether the record has a change waiting or being committed.
    func hasChange(for id: String) -> Bool { pending[id] != nil || inFlight[id] != nil }

    /// The number of items in the heap of first sequences, current or not (kept within a
    /// small multiple of the entries).
    var oldestSequenceItems: Int { sequences.count }

    /// The oldest change sequence number of any entry, waiting or in flight.
    mutating func oldestSequence() -> Int? {
        let (pending, inFlight) = (pending, inFlight)
        return sequences.oldest { Self.isFirst($0, of: $1, pending: pending, inFlight: inFlight) }
    }

    /// Whether `sequence` is the first sequence of the entry of `id`, waiting or in flight.
    private static func isFirst(
        _ sequence: Int, of id: String, pending: IDMap<PendingEntry<Record>>, inFlight: IDMap<PendingEntry<Record>>
    ) -> Bool {
        pending[id]?.firstSequence == sequence || inFlight[id]?.firstSequence == sequence
    }

    /// The pending changes, oldest first.
    var pendingChanges: [PendingChange] {
        let sending = inFlight.values.map { entry in
            var change = entry.publicForm
            change.isCommitting = true
            return (entry.firstSequence, change)
        }
        let waiting = pending.values.map { ($0.firstSequence, $0.publicForm) }
        return (sending + waiting).sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Whether something is in flight or waits to be sent (not on hold).
    mutating func hasWorkToSend() -> Bool { !inFlight.isEmpty || hasQueuedEntry() }

    // MARK: Local changes

    /// Folds a local change of `id` into its waiting entry, or queues a new one.
    ///
    /// - Parameters:
    ///   - stored: The stored record the mirror knows for `id`.
    /// - Returns: `false` when the change cancels a creation that was never stored: the
    ///   entry is dropped, there is nothing to commit.
    mutating func add(
        _ id: String, value: Record?, timestamp: HLCTimestamp, sequence: Int, stored: StoredRecord?
    ) -> Bool {
        guard var entry = pending[id] else {
            let base: PendingEntry<Record>.Base = inFlight[id] != nil ? .outcomeOfCommitInFlight : .stored(stored)
            var entry = PendingEntry<Record>(
                recordID: id, value: value, base: base, timestamp: timestamp, firstSequence: sequence,
                lastSequence: sequence)
            enqueue(&entry)
            pending[id] = entry
            sequences.insert(sequence, id: id)
            if sequences.count > 2 * (pending.count + inFlight.count) + 64 {
                // Items of gone entries are dropped at the top only: drop them all once they
                // outnumber the entries (amortized, one pass per that many changes).
                let (pending, inFlight) = (pending, inFlight)
                sequences.removeAll { Self.isFirst($0, of: $1, pending: pending, inFlight: inFlight) }
            }
            return true
        }
        entry.value = value
        let neverSent = entry.isCreation && !entry.awaitsCommitInFlight && entry.earlierTimestamps.isEmpty
        // A creation never sent keeps its first timestamp: the record's creation clock,
        // which places it in every process's order (Views/CreationOrder.swift).
        if !neverSent || value == nil { entry.timestamp = timestamp }
        entry.lastSequence = sequence
        entry.resolvedFields = nil
        if entry.isOnHold {
            entry.standing = .queued
            enqueue(&entry)
        }
        if value == nil, neverSent, stored.map(\.isDeleted) ?? true {
            // Created and removed, and never stored (never sent, or every attempt failed in
            // a way that stored nothing): nothing to store, nothing to delete.
            pending[id] = nil
            return false
        }
        pending[id] = entry
        return true
    }

    /// The waiting entry of `id`, if any.
    func waiting(_ id: String) -> PendingEntry<Record>? { pending[id] }

    /// Replaces the waiting entry of its record (after a conflict was resolved).
    mutating func update(_ entry: PendingEntry<Record>) { pending[entry.recordID] = entry }

    /// Drops the waiting entry of `id`.
    mutating func drop(_ id: String) { pending[id] = nil }

    /// Puts the entries on hold with `error` until the record changes again or a flush asks.
    mutating func hold(_ id: String, error: MirrorError) {
        guard var entry = pending[id] else { return }
        entry.standing = .onHold
        entry.lastError = error
        entry.failedAttempts += 1
        pending[id] = entry
    }

    /// Queues again the entries on hold whose first change is at most `target`, and lets the
    /// next commit start at once (a `flush()`).
    mutating func retryHeld(upTo target: Int) {
        for (id, var entry) in pending where entry.isOnHold && entry.firstSequence <= target {
            entry.standing = .queued
            enqueue(&entry)
            pending[id] = entry
        }
        backoff.retryNow()
    }

    // MARK: Sending

    /// The next batch to commit, moved in flight; or how long to wait.
    mutating func next(now: ContinuousClock.Instant) -> WorkerStep<[PendingEntry<Record>]> {
        guard inFlight.isEmpty, hasQueuedEntry() else { return .wait(until: nil) }
        if let deadline = backoff.deadline(now: now) { return .wait(until: deadline) }
        let limit = batchSize == .full ? maximumBatchSize : 1
        var batch: [PendingEntry<Record>] = []
        while batch.count < limit, hasQueuedEntry() {
            let item = order[orderHead]
            orderHead += 1
            guard let entry = pending.removeValue(forKey: item.id) else { continue }
            inFlight[item.id] = entry
            batch.append(entry)
        }
        if orderHead > Self.orderCompactionThreshold, orderHead * 2 > order.count {
            order.removeFirst(orderHead)
            orderHead = 0
        }
        return .run(batch)
    }

    /// Takes back entries that could not be encoded and puts them on hold.
    mutating func encodingFailed(_ failures: [(PendingEntry<Record>, MirrorError)]) {
        for (entry, error) in failures {
            var entry = takeBack(entry, mayBeStored: false)
            entry.failedAttempts += 1
            entry.lastError = error
            entry.standing = .onHold
            pending[entry.recordID] = entry
        }
    }

    /// Ends a commit whose operations were all applied; returns each entry with the record
    /// as stored (entries without an applied result are queued again).
    mutating func applied(_ batch: [PendingEntry<Record>], results: [CommitOutcome.Result]) -> [(PendingEntry<Record>, StoredRecord)] {
        var stored: [(PendingEntry<Record>, StoredRecord)] = []
        // By index: in generic code a zip's iterator looks up the metadata of its element
        // tuple on every step.
        for index in 0..<min(batch.count, results.count) {
            let entry = batch[index]
            let result = results[index]
            inFlight[entry.recordID] = nil
            guard case .applied(let record) = result else { continue }
            if var newer = pending[entry.recordID], newer.awaitsCommitInFlight {
                newer.base = record
                pending[entry.recordID] = newer
            }
            stored.append((entry, record))
        }
        // With a result for every operation, every entry left the flight above.
        if results.count < batch.count { requeueAtFront(strays(of: batch)) }
        backoff.succeeded()
        if case .isolating(let remaining) = batchSize, remaining > 1 {
            batchSize = .isolating(remaining: remaining - 1)
        } else {
            batchSize = .full
        }
        return stored
    }

    /// Takes back a batch refused because some operations conflicted; returns each
    /// conflicting entry (with any newer change folded in) and the record as stored now.
    mutating func conflicted(_ batch: [PendingEntry<Record>], results: [CommitOutcome.Result]) -> [(PendingEntry<Record>, StoredRecord?)] {
        var returned: [PendingEntry<Record>] = []
        var conflicts: [(PendingEntry<Record>, StoredRecord?)] = []
        for index in 0..<min(batch.count, results.count) {
            let entry = takeBack(batch[index], mayBeStored: false)
            let result = results[index]
            if case .conflict(let current) = result { conflicts.append((entry, current)) }
            returned.append(entry)
        }
        returned.append(contentsOf: strays(of: batch))
        requeueAtFront(returned)
        return conflicts
    }

    /// Takes back a batch whose commit threw.
    ///
    /// - Parameter blamed: The records the database said were at fault, if any.
    mutating func failed(
        _ batch: [PendingEntry<Record>], error: MirrorError, blamed: [String],
        now: ContinuousClock.Instant, configuration: MirrorConfiguration
    ) -> FailureHandling {
        let ids = Set(batch.map(\.recordID))
        var returned = batch.map { takeBack($0, mayBeStored: !error.nothingStored) }
        if error.kind == .cancelled {
            requeueAtFront(returned)
            return .requeued
        }
        let oldest = returned.map(\.firstSequence).min() ?? Int.max
        if error.kind.isTransient {
            for index in returned.indices {
                returned[index].failedAttempts += 1
                returned[index].lastError = error
            }
            backoff.failed(now: now, configuration: configuration)
            requeueAtFront(returned)
            return .retrying(oldest: oldest)
        }
        let named = Set(blamed).intersection(ids)
        if named.isEmpty, batch.count > 1 {
            // One of the batch is bad but the error does not say which: send them one by
            // one to find it, without reporting the failure until it is found.
            batchSize = .isolating(remaining: batch.count)
            requeueAtFront(returned)
            return .isolating
        }
        var held: [PendingEntry<Record>] = []
        var others: [PendingEntry<Record>] = []
        for var entry in returned {
            if named.isEmpty || named.contains(entry.recordID) {
                entry.failedAttempts += 1
                entry.lastError = error
                entry.standing = .onHold
                held.append(entry)
            } else {
                others.append(entry)
            }
        }
        for entry in held { pending[entry.recordID] = entry }
        requeueAtFront(others)
        return .held(oldest: held.map(\.firstSequence).min() ?? oldest)
    }

    // MARK: The order

    private mutating func enqueue(_ entry: inout PendingEntry<Record>) {
        entry.number = nextNumber
        nextNumber += 1
        order.append((entry.recordID, entry.number))
    }

    /// Puts entries back at the front of the order, in their order.
    private mutating func requeueAtFront(_ entries: [PendingEntry<Record>]) {
        guard !entries.isEmpty else { return }
        var front: [(id: String, number: Int)] = []
        front.reserveCapacity(entries.count + order.count - orderHead)
        for var entry in entries {
            entry.number = nextNumber
            nextNumber += 1
            front.append((entry.recordID, entry.number))
            pending[entry.recordID] = entry
        }
        front.append(contentsOf: order[orderHead...])
        order = front
        orderHead = 0
    }

    /// Skips order items that no longer name a sendable entry; whether one remains.
    private mutating func hasQueuedEntry() -> Bool {
        while orderHead < order.count {
            let item = order[orderHead]
            if let entry = pending[item.id], entry.number == item.number, !entry.isOnHold, !entry.awaitsCommitInFlight {
                return true
            }
            orderHead += 1
        }
        if orderHead > 0 {
            order.removeAll(keepingCapacity: true)
            orderHead = 0
        }
        return false
    }

    /// Takes an in-flight entry back, folding in a newer change made meanwhile.
    ///
    /// - Parameter mayBeStored: The attempt failed in a way that may have stored it anyway
    ///   (a commit that threw); its timestamp is kept to recognise it later.
    private mutating func takeBack(_ sent: PendingEntry<Record>, mayBeStored: Bool) -> PendingEntry<Record> {
        let id = sent.recordID
        var entry = inFlight.removeValue(forKey: id) ?? sent
        entry.standing = .queued
        if mayBeStored { entry.earlierTimestamps.append(entry.timestamp) }
        guard let newer = pending.removeValue(forKey: id) else { return entry }
        entry.earlierTimestamps.append(contentsOf: newer.earlierTimestamps)
        entry.value = newer.value
        entry.timestamp = newer.timestamp
        entry.lastSequence = newer.lastSequence
        entry.resolvedFields = newer.resolvedFields
        return entry
    }

    /// Entries of a batch still in flight after its outcome was handled: the outcome had
    /// fewer results than operations. Taken back so that they are sent again.
    private mutating func strays(of batch: [PendingEntry<Record>]) -> [PendingEntry<Record>] {
        batch.filter { inFlight[$0.recordID] != nil }.map { takeBack($0, mayBeStored: true) }
    }
}
