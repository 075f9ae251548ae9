import Foundation

/// Everything a ``Mirror`` knows, guarded by its lock, and the rules that change it: local
/// changes becoming pending entries, batches, commit outcomes, remote changes, flush waiters
/// and the delivery of changes and errors.
///
/// Every method runs with the mirror's lock held and never blocks or calls user code;
/// notifications to post are collected and handed out by ``drain(owner:)``.
struct MirrorState<Record: Recordable> {
    /// The zone the state holds; another one after a user switch (``startOver(in:)``).
    private(set) var zone: ZoneID
    /// Counts the zones the mirror held: a pull or commit started in an earlier one
    /// belongs to the state handed over then.
    private(set) var epoch = 0
    let writerID: String
    let configuration: MirrorConfiguration
    var policy: ConflictPolicy<Record>

    // MARK: The array

    /// What `dataModel` returns.
    var array = RecordArray<Record>()
    /// The value of every record in ``array``, by id: what a mutation is compared with.
    var present: IDMap<Record> = [:]
    /// Counts local mutations, to tell their change logs apart.
    private var session: UInt64 = 0
    /// The live views of the mirror (Views/Mirror+LiveView.swift), updated on every change.
    var liveViews: [Int: LiveViewReference<Record>] = [:]
    /// The views a change reached since the last drain, whose observers to notify.
    var changedLiveViews: [LiveView<Record>] = []

    // MARK: What the database holds

    /// The latest stored version the mirror knows of each record, tombstones included.
    var shadow: IDMap<StoredRecord> = [:]
    /// The token of the changes applied to ``shadow``.
    var token = ChangeToken.initial
    /// The highest token a notification announced; a pull is due while it is ahead.
    private var pullTarget: ChangeToken?
    /// A pull is due whatever the token (a complete change set was set aside).
    private var pullAgain = false
    /// Counts commits that returned an outcome, so that a pull can tell whether one did
    /// meanwhile.
    private var commitRounds = 0
    private var pullFailures = 0
    private var pullRetryAt: ContinuousClock.Instant?
    /// Decoding failures reported, by record id: the version reported.
    private var reportedUndecodable: IDMap<Int> = [:]
    /// Remote versions pulled while a local change of the record was pending or being
    /// committed, by id. The array keeps showing the local value meanwhile and takes the
    /// remote one when the local change settles without superseding it (``settle(_:)``):
    /// otherwise the array would lag behind ``shadow``, and the next local edit, based on
    /// the newer version but made on the older value, would undo the remote change.
    private var heldBack: IDMap<(record: StoredRecord, value: Result<Record, any Error>?)> = [:]

    // MARK: Pending changes

    /// Entries waiting to be sent, by record id.
    var pending: IDMap<PendingEntry<Record>> = [:]
    /// Entries being committed right now, by record id.
    var inFlight: IDMap<PendingEntry<Record>> = [:]
    /// The order to send pending entries in; items whose number no longer matches their
    /// entry are skipped.
    private var queue: [(id: String, number: Int)] = []
    private var queueHead = 0
    private var nextNumber = 0
    /// Counts local changes; `flush()` waits for the ones up to the count when it was called.
    private(set) var changeSequence = 0
    private var consecutiveFailures = 0
    private var retryAt: ContinuousClock.Instant?
    /// Batch size limit; lowered to 1 to find the change a whole batch failed on.
    private var batchLimit: Int
    private var isolationRemaining = 0

    // MARK: Delivery

    private(set) var lastError: MirrorError?
    private var outbox: [(error: MirrorError, entry: String?)] = []
    private var observersDirty = false
    private var changeStreams: [Int: AsyncStream<MirrorChange<Record>>.Continuation] = [:]
    private var errorStreams: [Int: AsyncStream<MirrorError>.Continuation] = [:]
    private var observers: [Int: Wakeup] = [:]
    /// Called after every locked section that drains, whatever changed (for the waits of
    /// MirrorTesting, which re-read the state they wait on).
    private var stateObservers: [Int: @Sendable () -> Void] = [:]
    private var flushWaiters: [Int: (target: Int, continuation: CheckedContinuation<Void, any Error>)] = [:]
    private var nextDeliveryNumber = 0
    private(set) var isClosed = false
    /// The mirror itself while it has changes to commit, so that they are committed even
    /// when nothing else holds the mirror any more.
    private var retainer: AnyObject?

    init(zone: ZoneID, writerID: String, configuration: MirrorConfiguration, policy: ConflictPolicy<Record>) {
        self.zone = zone
        self.writerID = writerID
        self.configuration = configuration
        self.policy = policy
        self.batchLimit = configuration.maximumBatchSize
    }

    // MARK: Loading

    /// Takes the whole zone as the initial content. `decoded[i]` holds the result of
    /// decoding `set.records[i]` (`nil` for a tombstone).
    mutating func load(_ set: ChangeSet, decoded: [Result<Record, any Error>?]) {
        var records: [Record] = []
        records.reserveCapacity(set.records.count)
        shadow.reserveCapacity(set.records.count)
        let stored = set.records
        var newest = HLCTimestamp.zero
        // Creation order, the same in every process (see Views/CreationOrder.swift).
        let order = stored.indices.sorted {
            CreationOrder(created: stored[$0].created, id: stored[$0].id)
                < CreationOrder(created: stored[$1].created, id: stored[$1].id)
        }
        for index in order {
            let record = stored[index]
            shadow[record.id] = record
            if record.modified > newest { newest = record.modified }
            guard !record.isDeleted else { continue }
            switch decoded[index] {
            case .success(let value)?:
                records.append(value)
            case .failure(let error)?:
                reportUndecodable(record, error: error)
            case nil:
                break
            }
        }
        HybridLogicalClock.shared.observe(newest)
        array = RecordArray(records)
        array.startTracking()
        if array.mayHaveDuplicates { removeDuplicates(keeping: [:]) }
        present.reserveCapacity(array.count)
        for record in array { present[record.recordID] = record }
        token = set.token
    }

    // MARK: Local changes

    /// Prepares the array for an in-place mutation; returns the session to end.
    mutating func beginLocalMutation() -> UInt64 {
        session &+= 1
        array.beginLog(session: session)
        return session
    }

    /// Turns what the mutation did into pending changes.
    ///
    /// - Returns: Whether anything changed.
    @discardableResult
    mutating func endLocalMutation(session: UInt64) -> Bool {
        guard array.isTracked, let log = array.endLog(session: session) else {
            // The array was replaced as a whole: compare everything.
            return replaceAll(with: array)
        }
        if log.sawDuplicate || array.mayHaveDuplicates { removeDuplicates(keeping: present) }
        var changed = false
        for id in log.touched {
            let current = array.record(withID: id)
            if recordLocalChange(id, to: current) { changed = true }
        }
        return changed
    }

    /// Replaces the whole array, turning the differences into pending changes. Linear time.
    ///
    /// - Returns: Whether anything changed.
    @discardableResult
    mutating func replaceAll(with newValue: RecordArray<Record>) -> Bool {
        var replacement = RecordArray(newValue.array)
        replacement.startTracking()
        array = replacement
        if array.mayHaveDuplicates { removeDuplicates(keeping: present) }
        var changed = false
        var listed = IDSet()
        listed.reserveCapacity(array.count)
        for record in array.array {
            let id = record.recordID
            listed.insert(id)
            if recordLocalChange(id, to: record) { changed = true }
        }
        let gone = present.keys.filter { !listed.contains($0) }
        for id in gone where recordLocalChange(id, to: nil) { changed = true }
        return changed
    }

    /// Leaves one record of each id that appears more than once: the newest value, in the
    /// place of the record the array held before (see "One record per id" in `dataModel`).
    ///
    /// The newest value is the last copy that differs from `keeping[id]` (the value before
    /// the mutation), or the last copy when the id is new. Its place is that of the copy
    /// equal to `keeping[id]`, or of the first copy.
    private mutating func removeDuplicates(keeping: IDMap<Record>) {
        var place: IDMap<Int> = [:]
        var newest: IDMap<Int> = [:]
        var duplicated = IDSet()
        for (index, record) in array.enumerated() {
            let id = record.recordID
            let known = keeping[id]
            if let first = place[id] {
                duplicated.insert(id)
                if let known, record == known, array[first] != known { place[id] = index }
            } else {
                place[id] = index
            }
            if known.map({ record != $0 }) ?? true { newest[id] = index }
        }
        guard !duplicated.isEmpty else {
            array.rebuildPositions()
            return
        }
        var kept: [Record] = []
        kept.reserveCapacity(array.count)
        for (index, record) in array.enumerated() {
            let id = record.recordID
            guard duplicated.contains(id) else {
                kept.append(record)
                continue
            }
            if place[id] == index { kept.append(array[newest[id] ?? index]) }
        }
        array = RecordArray(kept)
        array.startTracking()
    }

    /// Records a local change of one record's value (from `present[id]` to `value`).
    ///
    /// - Returns: Whether the value changed.
    @discardableResult
    mutating func recordLocalChange(_ id: String, to value: Record?) -> Bool {
        let old = present[id]
        guard old != value else { return false }
        present[id] = value
        changeSequence += 1
        let timestamp = HybridLogicalClock.shared.now()
        if var entry = pending[id] {
            entry.value = value
            // A creation never sent keeps its first timestamp: the record's creation clock,
            // which places it in every process's order (Views/CreationOrder.swift).
            if !entry.isCreation || entry.basePending || !entry.earlierTimestamps.isEmpty || value == nil {
                entry.timestamp = timestamp
            }
            entry.lastSequence = changeSequence
            entry.resolvedFields = nil
            if entry.isOnHold {
                entry.isOnHold = false
                enqueue(&entry)
            }
            if value == nil, !entry.basePending, entry.isCreation, entry.earlierTimestamps.isEmpty,
               shadow[id].map(\.isDeleted) ?? true {
                // Created and removed, and never stored (never sent, or every attempt failed
                // in a way that stored nothing): nothing to store, nothing to delete.
                pending[id] = nil
                settle(id)
                checkFlushWaiters(failure: nil)
            } else {
                pending[id] = entry
            }
        } else {
            var entry = PendingEntry<Record>(
                recordID: id, value: value, timestamp: timestamp, firstSequence: changeSequence,
                lastSequence: changeSequence, number: 0)
            if inFlight[id] != nil {
                entry.basePending = true
            } else {
                entry.base = shadow[id]
            }
            enqueue(&entry)
            pending[id] = entry
        }
        let kind: MirrorChange<Record>.Kind = old == nil ? .inserted : (value == nil ? .removed : .updated)
        emit(MirrorChange(kind: kind, recordID: id, record: value, origin: .local, state: .pending))
        return true
    }

    private mutating func enqueue(_ entry: inout PendingEntry<Record>) {
        entry.number = nextNumber
        nextNumber += 1
        queue.append((entry.recordID, entry.number))
    }

    /// Puts entries back at the front of the queue, in their order.
    private mutating func requeueAtFront(_ entries: [PendingEntry<Record>]) {
        guard !entries.isEmpty else { return }
        var front: [(id: String, number: Int)] = []
        front.reserveCapacity(entries.count + queue.count - queueHead)
        for var entry in entries {
            entry.number = nextNumber
            nextNumber += 1
            front.append((entry.recordID, entry.number))
            pending[entry.recordID] = entry
        }
        front.append(contentsOf: queue[queueHead...])
        queue = front
        queueHead = 0
    }

    /// Skips queue items that no longer name a sendable entry; whether one remains.
    private mutating func hasQueuedEntry() -> Bool {
        while queueHead < queue.count {
            let item = queue[queueHead]
            if let entry = pending[item.id], entry.number == item.number, !entry.isOnHold, !entry.basePending {
                return true
            }
            queueHead += 1
        }
        if queueHead > 0 {
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
        }
        return false
    }

    // MARK: The background tasks' next steps

    enum Step {
        /// Pull, or commit the next batch.
        case work
        /// Nothing to do before `deadline` (or a signal).
        case wait(deadline: ContinuousClock.Instant?)
    }

    /// Whether the pulling task has work now.
    func nextPull(now: ContinuousClock.Instant) -> Step {
        guard pullAgain || (pullTarget.map { $0 > token } ?? false) else { return .wait(deadline: nil) }
        if let pullRetryAt, now < pullRetryAt { return .wait(deadline: pullRetryAt) }
        return .work
    }

    /// Whether the committing task has work now.
    mutating func nextCommit(now: ContinuousClock.Instant) -> Step {
        guard inFlight.isEmpty, hasQueuedEntry() else { return .wait(deadline: nil) }
        if let retryAt, now < retryAt { return .wait(deadline: retryAt) }
        return .work
    }

    // MARK: Committing

    /// Moves the next batch of entries to ``inFlight`` and returns them.
    mutating func takeBatch(now: ContinuousClock.Instant) -> [PendingEntry<Record>] {
        guard inFlight.isEmpty, retryAt.map({ now >= $0 }) ?? true else { return [] }
        var batch: [PendingEntry<Record>] = []
        while batch.count < batchLimit, hasQueuedEntry() {
            let item = queue[queueHead]
            queueHead += 1
            guard let entry = pending.removeValue(forKey: item.id) else { continue }
            inFlight[item.id] = entry
            batch.append(entry)
        }
        if queueHead > 1024, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        return batch
    }

    /// Puts entries that could not be encoded on hold and reports each.
    mutating func encodingFailed(_ failures: [(PendingEntry<Record>, MirrorError)]) {
        for (entry, error) in failures {
            var entry = takeBack(entry, mayBeStored: false)
            entry.failedAttempts += 1
            entry.lastError = error
            entry.isOnHold = true
            pending[entry.recordID] = entry
            report(error)
            checkFlushWaiters(failure: (error, entry.firstSequence))
        }
    }

    /// Takes an in-flight entry back, folding in a newer change made meanwhile.
    ///
    /// - Parameter mayBeStored: The attempt failed in a way that may have stored it anyway
    ///   (a commit that threw); its timestamp is kept to recognise it later.
    private mutating func takeBack(_ sent: PendingEntry<Record>, mayBeStored: Bool) -> PendingEntry<Record> {
        let id = sent.recordID
        var entry = inFlight.removeValue(forKey: id) ?? sent
        entry.isOnHold = false
        if mayBeStored { entry.earlierTimestamps.append(entry.timestamp) }
        guard let newer = pending.removeValue(forKey: id) else { return entry }
        entry.earlierTimestamps.append(contentsOf: newer.earlierTimestamps)
        entry.value = newer.value
        entry.timestamp = newer.timestamp
        entry.lastSequence = newer.lastSequence
        entry.resolvedFields = newer.resolvedFields
        return entry
    }

    /// Applies a commit whose operations were all applied.
    mutating func commitApplied(_ batch: [PendingEntry<Record>], outcome: CommitOutcome) {
        for (entry, result) in zip(batch, outcome.results) {
            inFlight[entry.recordID] = nil
            guard case .applied(let stored) = result else { continue }
            remember(stored)
            if var newer = pending[entry.recordID], newer.basePending {
                newer.base = stored
                newer.basePending = false
                pending[entry.recordID] = newer
            }
            emit(MirrorChange(
                kind: entry.changeKind, recordID: entry.recordID, record: entry.value,
                origin: .local, state: .committed))
            settle(entry.recordID)
        }
        requeueAtFront(strays(of: batch))
        consecutiveFailures = 0
        retryAt = nil
        commitRounds += 1
        if isolationRemaining > 0 {
            isolationRemaining -= 1
            if isolationRemaining == 0 { batchLimit = configuration.maximumBatchSize }
        } else {
            batchLimit = configuration.maximumBatchSize
        }
        if outcome.token.generation == token.generation, outcome.token.sequence == token.sequence + 1 {
            // Nothing else was committed in between: the mirror is up to date.
            token = outcome.token
        } else if outcome.token > token {
            pullTarget = max(pullTarget ?? outcome.token, outcome.token)
        }
        checkFlushWaiters(failure: nil)
    }

    /// A conflict to resolve: the entry (with any newer local change folded in) and the
    /// record as stored now.
    struct Conflict {
        var entry: PendingEntry<Record>
        var current: StoredRecord?
    }

    /// Takes back a batch that was refused because some operations conflicted.
    ///
    /// - Returns: The conflicts to resolve.
    mutating func commitConflicted(_ batch: [PendingEntry<Record>], outcome: CommitOutcome) -> [Conflict] {
        commitRounds += 1
        var returned: [PendingEntry<Record>] = []
        var conflicts: [Conflict] = []
        for (entry, result) in zip(batch, outcome.results) {
            let entry = takeBack(entry, mayBeStored: false)
            if case .conflict(let current) = result {
                if let current {
                    HybridLogicalClock.shared.observe(current.modified)
                    remember(current)
                } else {
                    // The record does not exist (any more): nothing to base a change on.
                    shadow[entry.recordID] = nil
                }
                conflicts.append(Conflict(entry: entry, current: current))
            }
            returned.append(entry)
        }
        returned.append(contentsOf: strays(of: batch))
        requeueAtFront(returned)
        return conflicts
    }

    /// Entries of a batch still in flight after its outcome was handled: the outcome had
    /// fewer results than operations. Taken back so that they are sent again.
    private mutating func strays(of batch: [PendingEntry<Record>]) -> [PendingEntry<Record>] {
        batch.filter { inFlight[$0.recordID] != nil }.map { takeBack($0, mayBeStored: true) }
    }

    /// How a conflict was settled, computed outside the lock.
    enum Resolution {
        /// Commit these fields, based on the stored record.
        case save(fields: Data, value: Record, base: StoredRecord?)
        /// Commit a deletion, based on the stored record.
        case delete(base: StoredRecord?)
        /// Drop the local change and show the stored record (`decoded`, or nothing when it
        /// is deleted or does not decode; `problem` then says why).
        case keepStored(StoredRecord?, decoded: Record?, problem: (any Error)?)
        /// Cannot be settled; keep the change on hold and report.
        case hold(MirrorError)
    }

    /// Applies a resolution, unless the record changed locally since the conflict was taken
    /// (the next commit then conflicts again and the newer change is resolved).
    mutating func apply(_ resolution: Resolution, to conflict: Conflict) {
        let id = conflict.entry.recordID
        guard var entry = pending[id], entry.lastSequence == conflict.entry.lastSequence else { return }
        switch resolution {
        case .save(let fields, let value, let base):
            entry.base = base
            entry.resolvedFields = fields
            entry.earlierTimestamps.append(entry.timestamp)
            entry.timestamp = HybridLogicalClock.shared.now()
            entry.value = value
            pending[id] = entry
            applyToArray(id, value, origin: .remote, state: .pending)
        case .delete(let base):
            entry.base = base
            entry.value = nil
            entry.resolvedFields = nil
            entry.earlierTimestamps.append(entry.timestamp)
            entry.timestamp = HybridLogicalClock.shared.now()
            pending[id] = entry
        case .keepStored(let stored, let decoded, let problem):
            pending[id] = nil
            if let stored, let problem, !stored.isDeleted { reportUndecodable(stored, error: problem) }
            applyToArray(id, decoded, origin: .remote, state: .committed)
            settle(id)
            checkFlushWaiters(failure: nil)
        case .hold(let error):
            entry.isOnHold = true
            entry.lastError = error
            entry.failedAttempts += 1
            pending[id] = entry
            report(error)
            checkFlushWaiters(failure: (error, entry.firstSequence))
        }
    }

    /// Takes back a batch whose commit threw.
    ///
    /// - Parameter blamed: The records the database said were at fault, if any.
    mutating func commitFailed(
        _ batch: [PendingEntry<Record>], error: MirrorError, blamed: [String], now: ContinuousClock.Instant
    ) {
        let ids = Set(batch.map(\.recordID))
        var returned = batch.map { takeBack($0, mayBeStored: !error.nothingStored) }
        if error.kind == .cancelled {
            requeueAtFront(returned)
            return
        }
        let oldest = returned.map(\.firstSequence).min() ?? Int.max
        if error.kind.isTransient {
            for index in returned.indices {
                returned[index].failedAttempts += 1
                returned[index].lastError = error
            }
            consecutiveFailures += 1
            retryAt = now.advanced(by: configuration.delay(afterFailures: consecutiveFailures))
            requeueAtFront(returned)
            report(error)
            checkFlushWaiters(failure: (error, oldest))
            return
        }
        let named = Set(blamed).intersection(ids)
        if named.isEmpty, batch.count > 1 {
            // One of the batch is bad but the error does not say which: send them one by
            // one to find it, without reporting the failure until it is found.
            batchLimit = 1
            isolationRemaining = batch.count
            requeueAtFront(returned)
            return
        }
        var held: [PendingEntry<Record>] = []
        var others: [PendingEntry<Record>] = []
        for var entry in returned {
            if named.isEmpty || named.contains(entry.recordID) {
                entry.failedAttempts += 1
                entry.lastError = error
                entry.isOnHold = true
                held.append(entry)
            } else {
                others.append(entry)
            }
        }
        for entry in held { pending[entry.recordID] = entry }
        requeueAtFront(others)
        report(error)
        checkFlushWaiters(failure: (error, held.map(\.firstSequence).min() ?? oldest))
    }

    // MARK: Discarding

    /// A record's waiting change with the stored record the mirror knows, for
    /// ``discard(_:decoded:problem:)``; `nil` when the record has no waiting change or its
    /// change is being committed right now.
    func discardable(_ id: String) -> Conflict? {
        guard inFlight[id] == nil, let entry = pending[id] else { return nil }
        return Conflict(entry: entry, current: shadow[id])
    }

    /// Drops a waiting change taken by ``discardable(_:)`` and shows the stored record
    /// (`stored`, a `keepStored` resolution), unless the record changed since.
    ///
    /// - Returns: Whether it was dropped.
    mutating func discard(_ taken: Conflict, showing stored: Resolution) -> Bool {
        let id = taken.entry.recordID
        guard inFlight[id] == nil, let entry = pending[id], entry.lastSequence == taken.entry.lastSequence else {
            return false
        }
        apply(stored, to: taken)
        // An earlier attempt may have been stored after all: read the zone again to show it.
        if !entry.earlierTimestamps.isEmpty { pullAgain = true }
        return true
    }

    // MARK: Remote changes

    /// Notes that the zone reached `token`; whether a pull is now due.
    mutating func hint(_ hinted: ChangeToken) -> Bool {
        guard !isClosed, hinted > token else { return false }
        if let pullTarget, pullTarget >= hinted { return false }
        pullTarget = hinted
        return true
    }

    /// Where a pull started: the token it asks from, and the count of commit outcomes.
    struct PullStart {
        var token: ChangeToken
        var commitRounds: Int
        var zone: ZoneID
        var epoch: Int
    }

    /// Starts a pull.
    mutating func beginPull() -> PullStart {
        pullTarget = nil
        pullAgain = false
        return PullStart(token: token, commitRounds: commitRounds, zone: zone, epoch: epoch)
    }

    /// The live records of a change set that are newer than what the mirror knows, which
    /// must be decoded before ``applyPull(_:since:decoded:)``.
    func recordsToDecode(in set: ChangeSet) -> [StoredRecord] {
        set.records.filter { record in
            guard !record.isDeleted else { return false }
            return (shadow[record.id]?.version ?? 0) < record.version
        }
    }

    /// Applies pulled changes: to ``shadow``, and to the array for every record without a
    /// local pending change (whose value the array keeps showing until it is committed).
    ///
    /// Commits run while a pull does. Records are applied only when newer than the version
    /// the mirror knows, so an incremental change set applies safely whatever committed
    /// meanwhile; a complete one, which also tells which records are gone, is set aside and
    /// pulled again when a commit completed meanwhile.
    mutating func applyPull(_ set: ChangeSet, since start: PullStart, decoded: IDMap<Result<Record, any Error>>) {
        // Pulled from the zone before a user switch: this state pulls its own.
        guard start.epoch == epoch else { return }
        if set.isComplete, start.commitRounds != commitRounds {
            pullAgain = true
            return
        }
        if !set.isComplete, set.token.generation != token.generation {
            pullAgain = true
            return
        }
        if set.isComplete {
            let listed = Set(set.records.map(\.id))
            let vanished = shadow.filter { !listed.contains($0.key) }
            for (id, stored) in vanished {
                shadow[id] = nil
                if !stored.isDeleted, pending[id] == nil, inFlight[id] == nil {
                    applyToArray(id, nil, origin: .remote, state: .committed)
                }
            }
        }
        for record in set.records {
            if let known = shadow[record.id], known.version >= record.version { continue }
            HybridLogicalClock.shared.observe(record.modified)
            shadow[record.id] = record
            guard pending[record.id] == nil, inFlight[record.id] == nil else {
                if record.isDeleted {
                    heldBack[record.id] = (record, nil)
                } else if let value = decoded[record.id] {
                    heldBack[record.id] = (record, value)
                }
                continue
            }
            if record.isDeleted {
                applyToArray(record.id, nil, origin: .remote, state: .committed)
                continue
            }
            switch decoded[record.id] {
            case .success(let value)?:
                applyToArray(record.id, value, origin: .remote, state: .committed)
            case .failure(let error)?:
                reportUndecodable(record, error: error)
                applyToArray(record.id, nil, origin: .remote, state: .committed)
            case nil:
                break
            }
        }
        if set.isComplete || set.token > token { token = set.token }
        pullFailures = 0
        pullRetryAt = nil
    }

    /// Once no local change of a record is left, shows the remote version pulled while one
    /// was, unless something newer (the mirror's own commit) superseded it.
    private mutating func settle(_ id: String) {
        guard pending[id] == nil, inFlight[id] == nil, let held = heldBack.removeValue(forKey: id),
              shadow[id]?.version == held.record.version
        else { return }
        switch held.value {
        case nil:
            applyToArray(id, nil, origin: .remote, state: .committed)
        case .success(let value)?:
            applyToArray(id, value, origin: .remote, state: .committed)
        case .failure(let error)?:
            reportUndecodable(held.record, error: error)
            applyToArray(id, nil, origin: .remote, state: .committed)
        }
    }

    mutating func pullFailed(_ error: MirrorError, now: ContinuousClock.Instant) {
        guard error.kind != .cancelled else { return }
        pullFailures += 1
        pullRetryAt = now.advanced(by: configuration.delay(afterFailures: pullFailures))
        pullAgain = true
        report(error)
    }

    private mutating func remember(_ stored: StoredRecord) {
        if let known = shadow[stored.id], known.version > stored.version { return }
        shadow[stored.id] = stored
    }

    /// Sets one record's value in the array (appending or removing it as needed).
    private mutating func applyToArray(
        _ id: String, _ value: Record?, origin: MirrorChange<Record>.Origin, state: MirrorChange<Record>.State
    ) {
        let old = present[id]
        guard old != value else { return }
        present[id] = value
        if let value {
            if let position = array.position(of: id) {
                array[position] = value
            } else {
                array.insert(value, at: creationPlace(of: id))
            }
        } else if let position = array.position(of: id) {
            array.remove(at: position)
        }
        let kind: MirrorChange<Record>.Kind = old == nil ? .inserted : (value == nil ? .removed : .updated)
        emit(MirrorChange(kind: kind, recordID: id, record: value, origin: origin, state: state))
    }

    private mutating func reportUndecodable(_ stored: StoredRecord, error: any Error) {
        guard reportedUndecodable[stored.id] != stored.version else { return }
        reportedUndecodable[stored.id] = stored.version
        report(
            MirrorError(
                .decodingFailed,
                "stored record \(stored.id) (version \(stored.version)) does not decode as "
                    + "\(Record.self): \(error); it is skipped and left untouched in the database",
                recordIDs: [stored.id], recordType: zone.recordType, scope: zone.scope,
                underlying: StoredRecordProblem.underlying(of: error)),
            entry: "\(zone)|\(Record.self)|\(stored.id)|\(stored.version)")
    }

    // MARK: Switching zones

    /// Starts over in another zone (the private zone of the user a mirror switched to) and
    /// returns the state of the old one.
    ///
    /// This state keeps what belongs to the mirror — its change streams, observers, error
    /// delivery, last error and the count of local changes — and holds the new zone, empty
    /// until a pull (already due) loads it. Every record of the old zone is removed from
    /// the array, each delivered as a committed remote removal.
    ///
    /// The returned state keeps what belongs to the old zone: its records, its pending
    /// changes and the commits in flight, and the flushes waiting for them (every change
    /// a waiting flush covers was made in the old zone). Its owner commits them there.
    mutating func startOver(in newZone: ZoneID) -> MirrorState<Record> {
        var old = self
        old.changeStreams = [:]
        old.errorStreams = [:]
        old.observers = [:]
        old.observersDirty = false
        old.liveViews = [:]
        old.outbox = []
        old.retainer = nil
        // The old state's own deliveries (its owner's flushes) are numbered from far below,
        // so that they never share a number with this state's, and a flush cancelled here
        // can be looked for there.
        old.nextDeliveryNumber = Int.min / 2

        var fresh = MirrorState(zone: newZone, writerID: writerID, configuration: configuration, policy: policy)
        fresh.epoch = epoch + 1
        fresh.array.startTracking()
        fresh.session = session
        fresh.changeSequence = changeSequence
        fresh.lastError = lastError
        fresh.outbox = outbox
        fresh.changeStreams = changeStreams
        fresh.errorStreams = errorStreams
        fresh.observers = observers
        fresh.nextDeliveryNumber = nextDeliveryNumber
        fresh.retainer = retainer  // released by the next drain, outside the lock
        fresh.isClosed = isClosed
        fresh.pullAgain = true
        fresh.liveViews = liveViews
        for record in array {
            fresh.emit(MirrorChange(kind: .removed, recordID: record.recordID, record: nil, origin: .remote, state: .committed))
        }
        fresh.observersDirty = true
        self = fresh
        return old
    }

    // MARK: Flush

    mutating func makeDeliveryNumber() -> Int {
        nextDeliveryNumber += 1
        return nextDeliveryNumber
    }

    /// Registers a `flush()`: it returns once every change made so far is committed, and
    /// throws when one of them fails. Changes on hold are tried again.
    mutating func addFlushWaiter(_ number: Int, _ continuation: CheckedContinuation<Void, any Error>) {
        if Task.isCancelled || isClosed {
            continuation.resume(throwing: MirrorError(
                .cancelled, "flush() was cancelled", recordType: zone.recordType, scope: zone.scope))
            return
        }
        let target = changeSequence
        guard let oldest = oldestPendingSequence(), oldest <= target else {
            continuation.resume()
            return
        }
        for (id, var entry) in pending where entry.isOnHold && entry.firstSequence <= target {
            entry.isOnHold = false
            enqueue(&entry)
            pending[id] = entry
        }
        retryAt = nil
        flushWaiters[number] = (target, continuation)
    }

    /// Ends a waiting flush with a cancellation error; whether it was waiting here.
    @discardableResult
    mutating func cancelFlushWaiter(_ number: Int) -> Bool {
        guard let waiter = flushWaiters.removeValue(forKey: number) else { return false }
        waiter.continuation.resume(throwing: MirrorError(
            .cancelled, "flush() was cancelled", recordType: zone.recordType, scope: zone.scope))
        return true
    }

    private func oldestPendingSequence() -> Int? {
        var oldest: Int?
        for entry in pending.values { oldest = min(oldest ?? entry.firstSequence, entry.firstSequence) }
        for entry in inFlight.values { oldest = min(oldest ?? entry.firstSequence, entry.firstSequence) }
        return oldest
    }

    /// Resumes the flushes that are done: every change they wait for is committed, or
    /// `failure` failed one of them (`failure.sequence` is the oldest failed change).
    private mutating func checkFlushWaiters(failure: (error: MirrorError, sequence: Int)?) {
        guard !flushWaiters.isEmpty else { return }
        let oldest = oldestPendingSequence()
        for (number, waiter) in flushWaiters {
            if oldest.map({ $0 > waiter.target }) ?? true {
                flushWaiters[number] = nil
                waiter.continuation.resume()
            } else if let failure, failure.sequence <= waiter.target {
                flushWaiters[number] = nil
                waiter.continuation.resume(throwing: failure.error)
            }
        }
    }

    // MARK: Delivery

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

    /// Whether any change is waiting to be committed.
    var hasPendingChanges: Bool { !pending.isEmpty || !inFlight.isEmpty }

    mutating func addChangeStream(_ number: Int, _ continuation: AsyncStream<MirrorChange<Record>>.Continuation) {
        if isClosed { continuation.finish() } else { changeStreams[number] = continuation }
    }

    mutating func removeChangeStream(_ number: Int) { changeStreams[number] = nil }

    mutating func addErrorStream(_ number: Int, _ continuation: AsyncStream<MirrorError>.Continuation) {
        if isClosed { continuation.finish() } else { errorStreams[number] = continuation }
    }

    mutating func removeErrorStream(_ number: Int) { errorStreams[number] = nil }

    mutating func addObserver(_ number: Int, _ wakeup: Wakeup) {
        observers[number] = wakeup
    }

    mutating func removeObserver(_ number: Int) { observers[number] = nil }

    mutating func addStateObserver(_ number: Int, _ observer: @escaping @Sendable () -> Void) {
        if !isClosed { stateObservers[number] = observer }
    }

    mutating func removeStateObserver(_ number: Int) { stateObservers[number] = nil }

    private mutating func emit(_ change: MirrorChange<Record>) {
        for continuation in changeStreams.values { continuation.yield(change) }
        observersDirty = true
        if !liveViews.isEmpty { updateLiveViews(change.recordID, present[change.recordID]) }
    }

    /// Reports a failure: sets ``lastError``, delivers it on the error streams, and queues
    /// its notification for ``drain(owner:)``.
    ///
    /// - Parameter entry: For a failure that is one bad stored entry rather than one failed
    ///   attempt (a record that does not decode), a key naming the entry: every mirror that
    ///   finds it reports it, but its notification is posted once per process.
    mutating func report(_ error: MirrorError, entry: String? = nil) {
        lastError = error
        for continuation in errorStreams.values { continuation.yield(error) }
        outbox.append((error, entry))
    }

    /// What to do once the lock is released.
    struct Effects {
        /// The errors to post, each with the key of the bad entry it stands for, if any.
        var errors: [(error: MirrorError, entry: String?)] = []
        var observers: [Wakeup] = []
        /// Every state observer: called after every drain.
        var stateObservers: [@Sendable () -> Void] = []
        /// The live views whose observers to notify.
        var liveViews: [LiveView<Record>] = []
        /// The mirror, no longer retained by itself; released (and possibly deallocated)
        /// outside the lock.
        var released: AnyObject?
    }

    /// Hands out the notifications to post and the observers to wake, and makes `owner`
    /// (the mirror) retain itself exactly while it has changes to commit.
    mutating func drain(owner: AnyObject) -> Effects {
        var effects = Effects()
        if !inFlight.isEmpty || hasQueuedEntry() {
            if retainer == nil { retainer = owner }
        } else if retainer != nil {
            effects.released = retainer
            retainer = nil
        }
        if !outbox.isEmpty {
            effects.errors = outbox
            outbox.removeAll()
        }
        if observersDirty {
            observersDirty = false
            effects.observers = Array(observers.values)
        }
        if !stateObservers.isEmpty { effects.stateObservers = Array(stateObservers.values) }
        if !changedLiveViews.isEmpty {
            effects.liveViews = changedLiveViews
            changedLiveViews.removeAll()
        }
        return effects
    }

    /// Ends delivery: returns the streams to finish and the observers to wake (outside the
    /// lock).
    mutating func close() -> (changes: [AsyncStream<MirrorChange<Record>>.Continuation],
                              errors: [AsyncStream<MirrorError>.Continuation], observers: [Wakeup]) {
        isClosed = true
        defer {
            changeStreams.removeAll()
            errorStreams.removeAll()
            observers.removeAll()
            stateObservers.removeAll()
        }
        for waiter in flushWaiters.values {
            waiter.continuation.resume(throwing: MirrorError(
                .cancelled, "the mirror was deallocated", recordType: zone.recordType, scope: zone.scope))
        }
        flushWaiters.removeAll()
        return (Array(changeStreams.values), Array(errorStreams.values), Array(observers.values))
    }
}
