import Observation
import Synchronization

/// `Mirror` works with the Observation framework: reading ``Mirror/dataModel`` or
/// ``Mirror/lastError`` inside `withObservationTracking` (or a SwiftUI view's `body`)
/// tracks it, and every change to it, local or remote, fires the tracking.
///
/// ```swift
/// withObservationTracking {
///     render(mirror.dataModel)
/// } onChange: {
///     scheduleRender()
/// }
/// ```
extension Mirror: Observable {}

extension Mirror {
    /// A new sequence of every change to ``dataModel`` from now on, in order, until the mirror
    /// is deallocated (when the sequence ends).
    ///
    /// Each call returns a new sequence that gets every change made after the call, so
    /// several readers each get every change; keep the sequence you iterate. A local change
    /// comes twice, pending then committed; a remote one once, committed. Changes are
    /// buffered until you read them.
    ///
    /// ```swift
    /// for await change in mirror.changes() where change.origin == .remote {
    ///     print("\(change.kind) \(change.recordID)")
    /// }
    /// ```
    public func changes() -> AsyncStream<MirrorChange<Record>> {
        let (stream, continuation) = AsyncStream.makeStream(of: MirrorChange<Record>.self)
        let number = core.withLock { $0.delivery.makeNumber() }
        continuation.onTermination = { [weak self] _ in
            guard let core = self?.core else { return }
            // Not on this thread: see `Mirror.runOnAnotherThread(_:)`.
            Mirror.runOnAnotherThread { core.withLock { $0.delivery.removeChangeStream(number) } }
        }
        core.withLock { $0.delivery.addChangeStream(number, continuation) }
        return stream
    }

    /// The record with `recordID` as soon as ``dataModel`` shows one: at once when it does
    /// already, otherwise when it arrives (saved by another writer or process and pulled,
    /// or added by this process).
    ///
    /// For an app that is handed an id before the record reaches it (a link to a note just
    /// created on another device, a record another process is about to save):
    ///
    /// ```swift
    /// let note = try await notes.waitForRecord(withID: sharedID, timeout: .seconds(30))
    /// ```
    ///
    /// It only watches: nothing is fetched or pulled for it, and it waits without polling,
    /// checking again after each change of the mirror. To wait until your own changes are
    /// stored, call ``flush()``; to follow a record's later values, ``changes()`` or
    /// ``observe(_:)``.
    ///
    /// - Parameters:
    ///   - recordID: The id of the record to wait for.
    ///   - timeout: How long to wait at most; `nil` (the default) waits until the calling
    ///     task is cancelled.
    /// - Returns: The record, as ``dataModel`` shows it when it is found.
    /// - Throws: ``MirrorError/Kind/timedOut`` when no record with this id was shown in
    ///   time; ``MirrorError/Kind/decodingFailed`` (the error of ``skippedRecords``) as soon
    ///   as the stored record with this id is one the mirror skips because it does not
    ///   decode; ``MirrorError/Kind/cancelled`` when the calling task is cancelled.
    public func waitForRecord(withID recordID: String, timeout: Duration? = nil) async throws -> Record {
        // The record shown, or the error of the stored record when the mirror skips it.
        let found = { [core] () -> Result<Record, MirrorError>? in
            core.withLock { engine in
                if let record = engine.records[recordID] { return .success(record) }
                guard engine.isSkipped(recordID) else { return nil }
                return engine.reportedUndecodable[recordID].map { .failure($0.error) }
            }
        }
        if let result = found() { return try result.get() }
        // Each step of the mirror signals; the record is read on this task after the signal,
        // so none is missed however the signals coalesce.
        let (signals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let registration = observeState { continuation.yield() }
        defer { registration.cancel() }
        continuation.yield()
        let timer = timeout.map { timeout in
            Task {
                try? await Task.sleep(for: timeout)
                continuation.finish()
            }
        }
        defer { timer?.cancel() }
        for await _ in signals {
            if let result = found() { return try result.get() }
        }
        if let result = found() { return try result.get() }
        let zone = self.zone
        if Task.isCancelled {
            throw MirrorError(
                .cancelled, "the wait for record \(recordID) of \(zone) was cancelled",
                recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope)
        }
        throw MirrorError(
            .timedOut,
            "record \(recordID) did not reach the mirror of \(zone) within \(timeout.map { "\($0)" } ?? "the wait"): "
                + "no writer saved it there yet (or it was saved in another zone: another record type, scope or user)",
            recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope)
    }

    /// A new sequence of every failure the mirror reports from now on, until the mirror is
    /// deallocated (when the sequence ends).
    ///
    /// The same errors are posted as `Notification`s named `.mirrorError` and kept as
    /// ``lastError``. Each call returns a new sequence that gets every failure reported after
    /// the call; failures are buffered until you read them.
    public func errors() -> AsyncStream<MirrorError> {
        let (stream, continuation) = AsyncStream.makeStream(of: MirrorError.self)
        let number = core.withLock { $0.delivery.makeNumber() }
        continuation.onTermination = { [weak self] _ in
            guard let core = self?.core else { return }
            Mirror.runOnAnotherThread { core.withLock { $0.delivery.removeErrorStream(number) } }
        }
        core.withLock { $0.delivery.addErrorStream(number, continuation) }
        return stream
    }

    /// Calls `handler` with the current records at once, then with a new snapshot each time
    /// the records have changed, until the returned ``MirrorCancellable`` is cancelled or
    /// deallocated, or the mirror is.
    ///
    /// The first call is made before `observe` returns, on the caller's thread. Later calls
    /// are made one at a time on a background task and are coalesced snapshots: changes
    /// made while a call runs, or in a quick succession, arrive together in one call with
    /// the records as they are then, so intermediate states can be skipped. A call is made
    /// only when the records differ from the ones the previous call got: a commit that only
    /// confirms a change already shown, or an edit undone before the next call, makes no
    /// call.
    ///
    /// For example, appending, editing and removing one record in a row makes no call after
    /// the first: the records end as they were. To see every change, with its record and
    /// whether it is committed, read ``changes()`` instead.
    ///
    /// ```swift
    /// let observation = mirror.observe { todos in print(todos.count, "items") }
    /// // …
    /// observation.cancel()
    /// ```
    ///
    /// For UI code, ``observeOnMainActor(_:)`` makes every call on the main actor.
    ///
    /// - Parameter handler: Gets the records; must not block for long. Each call reads the
    ///   whole array, so its cost grows with the number of records.
    /// - Returns: Keep it as long as you want calls.
    public func observe(_ handler: @escaping @Sendable ([Record]) -> Void) -> MirrorCancellable {
        guard let (number, wakeup, first) = addRecordsObserver() else { return MirrorCancellable {} }
        // Before the task starts, so that calls never overlap.
        handler(first)
        let task = Task { [weak self] in
            var delivered = first
            while true {
                await wakeup.wait()
                guard !Task.isCancelled, let records = self?.currentRecords() else { return }
                // Equal arrays that share storage compare in constant time: a wake-up after
                // a commit that changed nothing costs nothing.
                if records != delivered {
                    delivered = records
                    handler(records)
                }
            }
        }
        return recordsObservation(number, task)
    }

    /// Registers an observer of the records: its number, the wake-up it is woken through,
    /// and the records now; `nil` (and nothing registered) once the mirror is closed. Shared
    /// by ``observe(_:)`` and ``observeOnMainActor(_:)``.
    func addRecordsObserver() -> (number: Int, wakeup: Wakeup, first: [Record])? {
        let wakeup = Wakeup()
        let (number, first) = core.withLock { engine in
            let number = engine.delivery.makeNumber()
            engine.delivery.addObserver(number, wakeup)
            return (number, engine.delivery.isClosed ? nil : engine.records.array.array)
        }
        guard let first else {
            core.withLock { $0.delivery.removeObserver(number) }
            return nil
        }
        return (number, wakeup, first)
    }

    /// What ends an observation of the records: its task, and its registration.
    func recordsObservation(_ number: Int, _ task: Task<Void, Never>) -> MirrorCancellable {
        MirrorCancellable { [weak self] in
            task.cancel()
            self?.core.withLock { $0.delivery.removeObserver(number) }
        }
    }

    /// Calls `handler` after every step that may have changed the mirror's state (its
    /// records, ``pendingChanges``, ``lastError``): each local mutation, pull, commit outcome
    /// and failure, whether or not it changed anything visible. For MirrorTesting's waiting
    /// helpers, which re-read the state they wait for on each call, so they need not poll.
    ///
    /// `handler` runs on the thread that made the step, after the mirror's lock is released;
    /// it must return quickly and not block. It is not called when a batch is only taken to
    /// be committed, nor when ``flush()`` only requeues changes on hold; the commit that
    /// follows each is a step.
    ///
    /// - Returns: Cancel it (or let it go) to stop the calls.
    @_spi(Testing) public func observeState(_ handler: @escaping @Sendable () -> Void) -> MirrorCancellable {
        let number = core.withLock { engine in
            let number = engine.delivery.makeNumber()
            engine.delivery.addStateObserver(number, handler)
            return number
        }
        return MirrorCancellable { [weak self] in
            self?.core.withLock { $0.delivery.removeStateObserver(number) }
        }
    }

    func currentRecords() -> [Record]? {
        core.withLock { $0.delivery.isClosed ? nil : $0.records.array.array }
    }
}
