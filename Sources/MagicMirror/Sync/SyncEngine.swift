import Foundation

/// The sync engine behind a ``Mirror``: the records it shows, its changes on their way to
/// the database, what it knows of the database, its waiting flushes and its listeners, and
/// the rules that tie them together.
///
/// It is made of parts, each a value type with a job and tests of its own:
///
/// - ``ShownRecords``: the array the mirror shows, and which records an edit changed.
/// - ``CommitQueue``: the local changes on their way, in batches, with retries.
/// - ``PullTracker``: the stored versions, the token, when to pull, held-back remote values.
/// - ``FlushWaiters``: the `flush()` calls waiting.
/// - ``ChangeDelivery``: streams, observers, the last error, the notifications to post.
///
/// The engine is guarded by the mirror's lock (see ``Mirror``'s header). Every method runs
/// with the lock held and never blocks; the only user code it runs is records' `==`, to
/// compare a record with the one shown. What is left to do once the lock is released is
/// handed out by ``drain(owner:)``. The background tasks do their slow work
/// (database calls, encoding, decoding, conflict policies) between two locked sections.
///
/// This file: the parts and local edits. `SyncEngine+Loading.swift`: the zone's first
/// content. `SyncEngine+Committing.swift`: commit outcomes and conflicts.
/// `SyncEngine+Pulling.swift`: remote changes and user switches.
struct SyncEngine<Record: Recordable> {
    /// The zone the engine holds; another one after a user switch (``startOver(in:)``).
    private(set) var zone: ZoneID
    /// The number of user switches before this engine's zone: a pull or commit started
    /// under another count belongs to the engine handed over at that switch.
    var zoneSwitches = 0
    let writerID: String
    let configuration: MirrorConfiguration
    var policy: ConflictPolicy<Record>

    var records = ShownRecords<Record>()
    var queue: CommitQueue<Record>
    var pull = PullTracker<Record>()
    var flushes = FlushWaiters<CheckedContinuation<Void, any Error>>()
    var delivery = ChangeDelivery<Record>()

    /// Counts local changes; `flush()` waits for the ones up to the count when it was called.
    var changeSequence = 0
    /// A refusal no waiting `flush()` threw (the change was refused and dropped before any
    /// flush waited for it): the next `flush()` throws it.
    var unthrownRefusal: MirrorError?
    /// Decoding failures reported, by record id: the version reported and its error.
    var reportedUndecodable: IDMap<SkippedRecord> = [:]

    /// The live views of the mirror (Views/Mirror+LiveView.swift), updated on every change.
    var liveViews: [Int: LiveViewReference<Record>] = [:]
    /// The changes made since the last drain, for the live views (handed over by
    /// ``drain(owner:)``).
    var liveViewUpdates: [LiveViewUpdate<Record>] = []

    /// Whether the mirror holds itself (it has changes to send).
    enum Retention {
        case notRetained
        /// The mirror itself, so that its changes are committed even when nothing else
        /// holds it any more.
        case retaining(AnyObject)
    }

    var retention = Retention.notRetained
    /// The mirror's shared zone subscription (left outside the lock).
    var subscription: ZoneSubscriptionMembership?
    /// The mirror's background tasks, cancelled when it goes away.
    var workers: [Task<Void, Never>] = []

    init(zone: ZoneID, writerID: String, configuration: MirrorConfiguration, policy: ConflictPolicy<Record>) {
        self.zone = zone
        self.writerID = writerID
        self.configuration = configuration
        self.policy = policy
        self.queue = CommitQueue(maximumBatchSize: configuration.maximumBatchSize)
    }

    // MARK: Local edits

    /// Ends an in-place edit begun with `records.beginEdit()`, taking back the array lent
    /// for it, and queues what it changed. Returns whether anything changed.
    mutating func endEdit(_ number: UInt64, returning edited: consuming RecordArray<Record>) -> Bool {
        recordLocalChanges(records.endEdit(number, returning: edited))
    }

    /// Replaces the whole array, queueing the differences. Linear time.
    mutating func replaceAll(with newValue: RecordArray<Record>) -> Bool {
        recordLocalChanges(records.replaceAll(with: newValue))
    }

    /// Queues the changes of an edit, except those that would overwrite a stored record the
    /// mirror skips (see ``refuseOverwritingSkipped(_:)``). Returns whether any was queued.
    private mutating func recordLocalChanges(_ changes: [ShownRecords<Record>.Change]) -> Bool {
        guard !reportedUndecodable.isEmpty else {
            for change in changes { recordLocalChange(change) }
            return !changes.isEmpty
        }
        var refused: [String] = []
        for change in changes {
            // A skipped record is not shown, so an edit can only insert a value under its id.
            if change.old == nil, isSkipped(change.id) {
                refused.append(change.id)
            } else {
                recordLocalChange(change)
            }
        }
        if !refused.isEmpty { refuseOverwritingSkipped(refused) }
        return changes.count > refused.count
    }

    /// Whether `id` is a stored record the mirror skips because it does not decode (listed
    /// in ``skippedRecords()``), with no local change of it on its way.
    func isSkipped(_ id: String) -> Bool {
        guard let skipped = reportedUndecodable[id], let stored = pull[id] else { return false }
        return stored.version == skipped.version && !stored.isDeleted && !queue.hasChange(for: id)
    }

    /// Refuses the values an edit gave records the mirror skips (`ids`): saving them would
    /// overwrite stored records that do not decode as `Record` — written by a newer version
    /// of the app, say — without anyone having seen them. The values leave the array, the
    /// stored records stay as they are, and the refusal is reported once, as
    /// ``MirrorError/Kind/refused``; the next `flush()` throws it.
    /// ``Mirror/discardSkippedRecord(recordID:)`` is the way to replace one on purpose.
    private mutating func refuseOverwritingSkipped(_ ids: [String]) {
        for id in ids { records.withdraw(id) }
        let one = ids.count == 1
        let named = (one ? "record " : "records ") + ids.prefix(3).joined(separator: ", ") + (ids.count > 3 ? ", …" : "")
        let (it, stored) = one ? ("it", "the stored record") : ("them", "the stored records")
        var error = MirrorError(
            .refused,
            "\(named) of \(zone) not saved: \(stored) with \(one ? "this id does" : "these ids do") not decode "
                + "as \(Record.self) and \(one ? "is" : "are") skipped (Mirror.skippedRecords), so saving would "
                + "overwrite data this version of \(Record.self) cannot read. \(stored.prefix(1).uppercased())"
                + "\(stored.dropFirst()) \(one ? "is" : "are") kept and the new \(one ? "value" : "values") dropped. "
                + "To replace \(it) on purpose, call discardSkippedRecord(recordID:) first, then add the record "
                + "again; to read \(it) instead, add the migration that makes \(it) decode",
            recordIDs: ids, recordType: zone.recordType, scope: zone.scope)
        error.nothingStored = true
        report(error)
        unthrownRefusal = error
    }

    /// Takes note of the deletion of a skipped record committed by
    /// ``Mirror/discardSkippedRecord(recordID:)`` (`tombstone`, as the commit returned it),
    /// or of the record found deleted by another writer. Returns whether a pull is due.
    mutating func skippedRecordDiscarded(_ tombstone: StoredRecord?, id: String, token: ChangeToken?) -> Bool {
        if let tombstone { pull.remember(tombstone) } else { pull.forget(id) }
        reportedUndecodable[id] = nil
        return pull.committed(upTo: token)
    }

    /// Queues a local change of one record's value, already shown.
    private mutating func recordLocalChange(_ change: ShownRecords<Record>.Change) {
        changeSequence += 1
        let kept = queue.add(
            change.id, value: change.new, timestamp: HybridLogicalClock.shared.now(), sequence: changeSequence,
            stored: pull[change.id])
        if !kept {
            revealHeldBack(change.id)
            resumeFlushes(failure: nil)
        }
        emit(MirrorChange(kind: change.kind, recordID: change.id, record: change.new, origin: .local, state: .pending))
    }

    // MARK: Showing

    /// Sets one record's value in the array (appending, inserting or removing it as needed).
    mutating func show(
        _ id: String, _ value: Record?, origin: MirrorChange<Record>.Origin, state: MirrorChange<Record>.State
    ) {
        // The order reads the tables it needs (shared, not copied): `records` changes
        // meanwhile.
        let (stored, inFlight, pending) = (pull.storedRecords, queue.inFlight, queue.pending)
        let order = { (id: String) in
            Self.creationOrder(of: id, stored: stored, inFlight: inFlight, pending: pending)
        }
        guard let change = records.set(id, value, orderedBy: order) else { return }
        emit(MirrorChange(kind: change.kind, recordID: id, record: value, origin: origin, state: state))
    }

    /// Once no local change of a record is left, shows the remote version pulled while one
    /// was, unless something newer (the mirror's own commit) superseded it.
    mutating func revealHeldBack(_ id: String) {
        // Usually nothing is held back: checked apart, before the look-up below, whose
        // generic code costs metadata look-ups on every committed record.
        if pull.hasHeldBack { revealHeldBackValue(id) }
    }

    private mutating func revealHeldBackValue(_ id: String) {
        guard !queue.hasChange(for: id), let held = pull.takeHeldBack(id) else { return }
        switch held.value {
        case nil:
            show(id, nil, origin: .remote, state: .committed)
        case .success(let value)?:
            show(id, value, origin: .remote, state: .committed)
        case .failure(let error)?:
            reportUndecodable(held.record, error: error)
            show(id, nil, origin: .remote, state: .committed)
        }
    }

    mutating func emit(_ change: MirrorChange<Record>) {
        delivery.emit(change)
        if !liveViews.isEmpty { updateLiveViews(change.recordID, records[change.recordID]) }
    }

    // MARK: Failures

    /// Reports a failure (see ``ChangeDelivery/report(_:entry:)``).
    mutating func report(_ error: MirrorError, entry: String? = nil) {
        delivery.report(error, entry: entry)
    }

    /// Reports a stored record that does not decode, once per version.
    mutating func reportUndecodable(_ stored: StoredRecord, error: any Error) {
        guard reportedUndecodable[stored.id]?.version != stored.version else { return }
        let failure = MirrorError(
            .decodingFailed,
            "stored record \(stored.id) does not decode as \(Record.self): \(error); "
                + "it is skipped and left untouched in the database",
            recordIDs: [stored.id], recordType: zone.recordType, scope: zone.scope,
            underlying: StoredRecordProblem.underlying(of: error))
        reportedUndecodable[stored.id] = SkippedRecord(recordID: stored.id, version: stored.version, error: failure)
        report(failure, entry: "\(zone)|\(Record.self)|\(stored.id)|\(stored.version)")
    }

    /// The stored records the mirror skips because they do not decode: those reported whose
    /// stored version is still the one the mirror knows, and not deleted. In the order of
    /// their ids' bytes.
    mutating func skippedRecords() -> [SkippedRecord] {
        var skipped: [SkippedRecord] = []
        for (id, record) in reportedUndecodable {
            guard let stored = pull[id], stored.version == record.version, !stored.isDeleted,
                  records[id] == nil
            else { continue }
            skipped.append(record)
        }
        return skipped.sorted { $0.recordID.utf8.lexicographicallyPrecedes($1.recordID.utf8) }
    }

    /// Moves the process's clock past `newest`, the latest clock of `records`; when that
    /// one is too far ahead to adopt (see ``HybridLogicalClock``), past the latest of the
    /// others, and reports each record whose clock is too far ahead.
    mutating func observeClocks(newest: HLCTimestamp, of records: some Collection<StoredRecord>) {
        let clock = HybridLogicalClock.shared
        guard !clock.observe(newest) else { return }
        clock.observe(latestOf: records.lazy.map(\.modified))
        for record in records where clock.isTooFarAhead(record.modified) { reportClockAhead(record) }
    }

    /// Reports a stored record whose clock is too far ahead to adopt, once per version.
    mutating func reportClockAhead(_ stored: StoredRecord) {
        let minutes = HybridLogicalClock.maximumOffset / 60_000
        report(
            MirrorError(
                .invalidRecord,
                "stored record \(stored.id) (version \(stored.version)) carries the clock reading "
                    + "\(stored.modified), more than \(minutes) minutes ahead of this machine's clock "
                    + "(writer \(stored.writer.isEmpty ? "unknown" : stored.writer)); the record is shown, "
                    + "but its clock is not adopted, so that this process's changes keep readings near the time",
                recordIDs: [stored.id], recordType: zone.recordType, scope: zone.scope),
            entry: "\(zone)|clock|\(stored.id)|\(stored.version)")
    }

    // MARK: Flush

    /// Registers a `flush()`: it returns once every change made so far is committed, and
    /// throws when one of them fails. Changes on hold are tried again.
    mutating func addFlushWaiter(_ number: Int, _ continuation: CheckedContinuation<Void, any Error>) {
        if Task.isCancelled || delivery.isClosed {
            continuation.resume(throwing: cancellation("flush() was cancelled"))
            return
        }
        if let refusal = unthrownRefusal {
            unthrownRefusal = nil
            continuation.resume(throwing: refusal)
            return
        }
        let target = changeSequence
        guard let oldest = queue.oldestSequence(), oldest <= target else {
            continuation.resume()
            return
        }
        queue.retryHeld(upTo: target)
        flushes.add(number, target: target, continuation)
    }

    /// Ends a waiting flush with a cancellation error; whether it was waiting here.
    @discardableResult
    mutating func cancelFlushWaiter(_ number: Int) -> Bool {
        guard let waiter = flushes.remove(number) else { return false }
        waiter.resume(throwing: cancellation("flush() was cancelled"))
        return true
    }

    /// Resumes the flushes that are done: every change they wait for is committed, or
    /// `failure` failed one of them (`failure.sequence` is the oldest failed change).
    mutating func resumeFlushes(failure: (error: MirrorError, sequence: Int)?) {
        guard !flushes.isEmpty else { return }
        for (waiter, error) in flushes.finished(oldestPending: queue.oldestSequence(), failure: failure) {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
    }

    private func cancellation(_ message: String) -> MirrorError {
        MirrorError(.cancelled, message, recordType: zone.recordType, scope: zone.scope)
    }

    // MARK: After each locked section

    /// What to do once the lock is released.
    struct Effects {
        var delivered = ChangeDelivery<Record>.Drained()
        /// The live views that were handed changes, each with the count of changes it must
        /// have applied (outside the lock: their filters and orders are user code).
        var liveViews: [(view: LiveView<Record>, upTo: Int)] = []
        /// The mirror, no longer retained by itself; released (and possibly deallocated)
        /// outside the lock.
        var released: AnyObject?
    }

    /// Hands out the notifications to post and the observers to wake, and makes `owner`
    /// (the mirror) retain itself exactly while it has changes to send.
    mutating func drain(owner: AnyObject) -> Effects {
        var effects = Effects()
        switch (queue.hasWorkToSend(), retention) {
        case (true, .notRetained): retention = .retaining(owner)
        case (false, .retaining(let retained)):
            effects.released = retained
            retention = .notRetained
        default: break
        }
        effects.delivered = delivery.drain()
        if !liveViewUpdates.isEmpty { effects.liveViews = handOverLiveViewUpdates() }
        return effects
    }

    /// Ends delivery and the background work: returns what to end outside the lock, and
    /// resumes every waiting flush with a cancellation error.
    mutating func close() -> (ChangeDelivery<Record>.Closed, workers: [Task<Void, Never>], subscription: ZoneSubscriptionMembership?) {
        for waiter in flushes.removeAll() {
            waiter.resume(throwing: cancellation("the mirror was deallocated"))
        }
        defer {
            workers = []
            subscription = nil
        }
        return (delivery.close(), workers, subscription)
    }
}
