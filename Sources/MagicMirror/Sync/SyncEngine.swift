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
/// with the lock held and never blocks or calls user code; what is left to do once the lock
/// is released is handed out by ``drain(owner:)``. The background tasks do their slow work
/// (database calls, encoding, decoding, conflict policies) between two locked sections.
///
/// This file: the parts, loading, and local edits. `SyncEngine+Committing.swift`: commit
/// outcomes and conflicts. `SyncEngine+Pulling.swift`: remote changes and user switches.
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
    /// The views a change reached since the last drain, whose observers to notify.
    var changedLiveViews: [LiveView<Record>] = []

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

    // MARK: Loading

    /// Takes the whole zone as the initial content. Position `i` of `decoded` is what
    /// decoding `set.records[i]` gave.
    ///
    /// Empties `set.records` and `decoded` once they are taken, before the shown records'
    /// tables are built, so that opening a large zone does not hold both at once. When the
    /// records come in the order they are shown (usually), the decoded values become the
    /// shown array as they are, without a copy.
    mutating func load(_ set: inout ChangeSet, decoded: inout DecodedRecords<Record>) {
        var newest = HLCTimestamp.zero
        // Each shown record's id, as the stored record's string when it has the same bytes:
        // the mirror's tables then share the database's strings instead of holding copies.
        // `nil` while the records are shown one for one in the order of the database's own
        // table of them (each live, decoded, under the same id bytes): that table's array of
        // ids then serves as it is, shared until either side adds or removes a record.
        var ids: [String]?
        let table: IDMap<StoredRecord>?
        var shown: [Record] = []
        do {
            let stored = set.records
            // Creation order, the same in every process (see Views/CreationOrder.swift). A
            // zone's records usually come in that order already: then no index array is
            // sorted (it would be alive at the peak of opening a large zone).
            func precedes(_ left: Int, _ right: Int) -> Bool {
                CreationOrder(created: stored[left].created, id: stored[left].id)
                    < CreationOrder(created: stored[right].created, id: stored[right].id)
            }
            let inOrder = stored.indices.dropFirst().allSatisfy { precedes($0 - 1, $0) }
            let order = inOrder ? nil : stored.indices.sorted(by: precedes)
            table = inOrder ? set.recordsByID : nil
            if table == nil {
                ids = []
                ids!.reserveCapacity(stored.count)
            }
            if inOrder, let found = Self.newestIfShownAsStored(stored, decoded) {
                // The usual case, checked in parallel parts: nothing to walk, and each id is
                // its stored record's (when there is no table of them to share).
                newest = found
                swap(&shown, &decoded.values)
                if ids != nil { ids = stored.map(\.id) }
            } else {
                // In order, the values are shown as they are: `shown` takes them, and a walk of
                // the positions finds each record's value in it. Out of order, each value is
                // looked up in a table of where they lie.
                var walk = DecodedRecords.Walk(decoded)
                let values: [Record]
                let valueIndices: [Int]?
                if inOrder {
                    swap(&shown, &decoded.values)
                    values = []
                    valueIndices = nil
                } else {
                    values = decoded.values
                    valueIndices = decoded.valueIndices
                    shown.reserveCapacity(values.count)
                }
                // The ids of the records shown so far, while they are `stored[..<position]`.
                func formIDs(upTo position: Int) {
                    var formed: [String] = []
                    formed.reserveCapacity(stored.count)
                    formed.append(contentsOf: stored[..<position].lazy.map(\.id))
                    ids = formed
                }
                for position in stored.indices {
                    let index = order?[position] ?? position
                    let record = stored[index]
                    if record.modified > newest { newest = record.modified }
                    let value: Record?
                    if let valueIndices {
                        value = valueIndices[index] >= 0 ? values[valueIndices[index]] : nil
                    } else {
                        value = walk.valueIndex(at: index).map { shown[$0] }
                    }
                    guard let value else {
                        if ids == nil { formIDs(upTo: position) }
                        if !record.isDeleted, let error = decoded.error(at: index) {
                            reportUndecodable(record, error: error)
                        }
                        continue
                    }
                    if !inOrder { shown.append(value) }
                    let id = value.recordID
                    let same = IDKey.same(id, record.id)
                    if ids == nil {
                        if same { continue }
                        formIDs(upTo: position)
                    }
                    ids!.append(same ? record.id : id)
                }
            }
        }
        observeClocks(newest: newest, of: set.records)
        pull.load(set)
        set.records = []
        decoded = DecodedRecords()
        if let ids {
            records.load(shown, ids: ids)
        } else {
            records.load(shown, indexOf: table!)
        }
    }

    /// The newest clock of `stored` when every record is live and decoded, at its own
    /// position, and each value has its record's id (the usual case): checked in parallel
    /// parts, since it reads every value's id. `nil` otherwise.
    private static func newestIfShownAsStored(
        _ stored: [StoredRecord], _ decoded: DecodedRecords<Record>
    ) -> HLCTimestamp? {
        guard decoded.missing.isEmpty, decoded.values.count == stored.count else { return nil }
        let values = decoded.values
        let parts = BatchJSONCoding.inParallelRanges(stored.count) { range -> HLCTimestamp? in
            var newest = HLCTimestamp.zero
            for index in range {
                if stored[index].modified > newest { newest = stored[index].modified }
                guard IDKey.same(values[index].recordID, stored[index].id) else { return nil }
            }
            return newest
        }
        var newest = HLCTimestamp.zero
        for part in parts {
            guard let part else { return nil }
            newest = max(newest, part)
        }
        return newest
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
        /// The live views whose observers to notify.
        var liveViews: [LiveView<Record>] = []
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
        if !changedLiveViews.isEmpty {
            effects.liveViews = changedLiveViews
            changedLiveViews.removeAll()
        }
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
