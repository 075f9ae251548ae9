import Foundation

// Commit outcomes, conflicts and discarded changes: how the engine follows its changes to
// the database (the batches themselves are the CommitQueue's).

extension SyncEngine {
    /// A conflict to resolve: the entry (with any newer local change folded in) and the
    /// record as stored now.
    struct Conflict {
        var entry: PendingEntry<Record>
        var current: StoredRecord?
    }

    /// How a conflict was settled, computed outside the lock (Mirror+Conflicts.swift).
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

    /// Puts entries that could not be encoded on hold and reports each.
    mutating func encodingFailed(_ failures: [(PendingEntry<Record>, MirrorError)]) {
        queue.encodingFailed(failures)
        for (entry, error) in failures {
            if !Self.repeats(error, of: [entry]) { report(error) }
            resumeFlushes(failure: (error, entry.firstSequence))
        }
    }

    /// Whether `error`, a failure that retrying cannot fix, is the one each of `entries` met
    /// on its previous attempt (same kind, same message): a change on hold that `flush()`
    /// (or a new edit of the record) sent again and that the database refused again for the
    /// same reason. It is the same failure, reported when it happened: it is not reported
    /// again, and the `flush()` calls waiting throw it (``PendingChange/failedAttempts``
    /// counts the attempts). A transient failure is reported at every attempt: each is a new
    /// event (the disk filled again), and retries after a backoff show it goes on.
    static func repeats(_ error: MirrorError, of entries: [PendingEntry<Record>]) -> Bool {
        !entries.isEmpty && entries.allSatisfy { entry in
            entry.lastError.map { $0.kind == error.kind && $0.message == error.message } ?? false
        }
    }

    /// Applies a commit whose operations were all applied.
    ///
    /// - Returns: Whether a pull is due (another writer committed in between).
    mutating func commitApplied(_ batch: [PendingEntry<Record>], outcome: CommitOutcome) -> Bool {
        for (entry, stored) in queue.applied(batch, results: outcome.results) {
            pull.remember(stored)
            emit(MirrorChange(
                kind: entry.changeKind, recordID: entry.recordID, record: entry.value,
                origin: .local, state: .committed))
            revealHeldBack(entry.recordID)
        }
        let pullDue = pull.committed(upTo: outcome.token)
        resumeFlushes(failure: nil)
        return pullDue
    }

    /// Takes back a batch that was refused because some operations conflicted.
    ///
    /// - Returns: The conflicts to resolve.
    mutating func commitConflicted(_ batch: [PendingEntry<Record>], outcome: CommitOutcome) -> [Conflict] {
        _ = pull.committed(upTo: nil)
        return queue.conflicted(batch, results: outcome.results).map { entry, current in
            if let current {
                HybridLogicalClock.shared.observe(current.modified)
                pull.remember(current)
            } else {
                // The record does not exist (any more): nothing to base a change on.
                pull.forget(entry.recordID)
            }
            return Conflict(entry: entry, current: current)
        }
    }

    /// Takes back a batch whose commit threw.
    ///
    /// - Parameter blamed: The records the database said were at fault, if any.
    mutating func commitFailed(
        _ batch: [PendingEntry<Record>], error: MirrorError, blamed: [String], now: ContinuousClock.Instant
    ) {
        switch queue.failed(batch, error: error, blamed: blamed, now: now, configuration: configuration) {
        case .requeued, .isolating:
            break
        case .retrying(let oldest):
            report(error)
            resumeFlushes(failure: (error, oldest))
        case .held(let oldest):
            // The entries held: those the database blamed, or the whole batch (of one, when
            // it blamed none: see `CommitQueue.failed`).
            let named = Set(blamed)
            let held = named.isEmpty ? batch : batch.filter { named.contains($0.recordID) }
            if !Self.repeats(error, of: held.isEmpty ? batch : held) { report(error) }
            resumeFlushes(failure: (error, oldest))
        }
    }

    /// Takes back a batch whose commit the database refused by a rule of its own
    /// (``MirrorError/Kind/refused``): the refused changes are put on hold and returned, to
    /// be dropped by ``settleRefusal(_:error:)`` once their stored records are decoded; the
    /// batch's other changes wait to be sent again.
    ///
    /// - Parameter blamed: The records the database refused; when it names none, a batch of
    ///   one change is that change, and a larger batch is sent again one change at a time.
    mutating func commitRefused(
        _ batch: [PendingEntry<Record>], error: MirrorError, blamed: [String], now: ContinuousClock.Instant
    ) -> [Conflict] {
        switch queue.failed(batch, error: error, blamed: blamed, now: now, configuration: configuration) {
        case .requeued, .isolating:
            return []
        case .retrying(let oldest), .held(let oldest):
            let sent = Set(batch.map(\.recordID))
            let refused = blamed.isEmpty && batch.count == 1 ? sent : sent.intersection(blamed)
            let taken = refused.compactMap { discardable($0) }
            if taken.isEmpty {
                // Held like any permanent failure: nothing of this batch can be dropped.
                report(error)
                resumeFlushes(failure: (error, oldest))
            }
            return taken
        }
    }

    /// Drops refused changes taken by ``commitRefused(_:error:blamed:now:)`` and shows each
    /// record as stored, in one step with reporting the refusal: the `flush()` calls waiting
    /// for them throw it, once the records show again; when none waits, the next `flush()`
    /// throws it.
    mutating func settleRefusal(_ refusals: [(Conflict, Resolution)], error: MirrorError) {
        report(error)
        let oldest = refusals.map(\.0.entry.firstSequence).min() ?? changeSequence
        if flushes.waitFor(oldest) {
            resumeFlushes(failure: (error, oldest))
        } else {
            unthrownRefusal = error
        }
        for (taken, stored) in refusals { _ = discard(taken, showing: stored) }
    }

    /// Applies a resolution, unless the record changed locally since the conflict was taken
    /// (the next commit then conflicts again and the newer change is resolved).
    mutating func apply(_ resolution: Resolution, to conflict: Conflict) {
        let id = conflict.entry.recordID
        guard var entry = queue.waiting(id), entry.lastSequence == conflict.entry.lastSequence else { return }
        switch resolution {
        case .save(let fields, let value, let base):
            entry.base = base
            entry.resolvedFields = fields
            entry.earlierTimestamps.append(entry.timestamp)
            entry.timestamp = HybridLogicalClock.shared.now()
            entry.value = value
            queue.update(entry)
            show(id, value, origin: .remote, state: .pending)
        case .delete(let base):
            entry.base = base
            entry.value = nil
            entry.resolvedFields = nil
            entry.earlierTimestamps.append(entry.timestamp)
            entry.timestamp = HybridLogicalClock.shared.now()
            queue.update(entry)
        case .keepStored(let stored, let decoded, let problem):
            queue.drop(id)
            if let stored, let problem, !stored.isDeleted { reportUndecodable(stored, error: problem) }
            show(id, decoded, origin: .remote, state: .committed)
            revealHeldBack(id)
            resumeFlushes(failure: nil)
        case .hold(let error):
            queue.hold(id, error: error)
            if !Self.repeats(error, of: [conflict.entry]) { report(error) }
            resumeFlushes(failure: (error, entry.firstSequence))
        }
    }

    // MARK: Discarding

    /// A record's waiting change with the stored record the mirror knows, for
    /// ``discard(_:showing:)``; `nil` when the record has no waiting change or its change is
    /// being committed right now.
    func discardable(_ id: String) -> Conflict? {
        guard queue.inFlight[id] == nil, let entry = queue.waiting(id) else { return nil }
        return Conflict(entry: entry, current: pull[id])
    }

    /// Drops a waiting change taken by ``discardable(_:)`` and shows the stored record
    /// (`stored`, a `keepStored` resolution), unless the record changed since.
    ///
    /// - Returns: Whether it was dropped.
    mutating func discard(_ taken: Conflict, showing stored: Resolution) -> Bool {
        let id = taken.entry.recordID
        guard queue.inFlight[id] == nil, let entry = queue.waiting(id),
              entry.lastSequence == taken.entry.lastSequence
        else { return false }
        apply(stored, to: taken)
        // An earlier attempt may have been stored after all: read the zone again to show it.
        if !entry.earlierTimestamps.isEmpty { pull.pullAnyway() }
        return true
    }
}

extension SyncEngine {
    /// A batch of entries in flight, with the zone it goes to and the user switches it
    /// belongs to.
    struct Batch {
        let entries: [PendingEntry<Record>]
        let zone: ZoneID
        let zoneSwitches: Int
    }

    /// Takes the next batch to commit, if one may be sent now.
    mutating func nextBatch(now: ContinuousClock.Instant) -> WorkerStep<Batch> {
        switch queue.next(now: now) {
        case .run(let entries): .run(Batch(entries: entries, zone: zone, zoneSwitches: zoneSwitches))
        case .wait(let deadline): .wait(until: deadline)
        }
    }
}
