import MagicMirror
import Synchronization

extension InMemoryDatabase {
    /// Whether an ``InMemoryDatabase`` instance can be reached and written.
    ///
    /// Set ``InMemoryDatabase/availability`` to make every commit (and, when unavailable,
    /// every read) fail until you set it back to ``available``.
    public enum Availability: Sendable, Hashable, CustomStringConvertible {
        /// Reads and commits work (subject to the other injected faults).
        case available
        /// Every commit and every read throws `MirrorError.Kind.unavailable`, as when a
        /// database server cannot be reached.
        case unavailable
        /// Every commit throws `MirrorError.Kind.readOnly`; reads work, as on a file
        /// system mounted read-only.
        case readOnly

        /// The case's name.
        public var description: String {
            switch self {
            case .available: "available"
            case .unavailable: "unavailable"
            case .readOnly: "readOnly"
            }
        }
    }

    /// Whether this instance can be reached and written; ``Availability/available`` at
    /// first.
    ///
    /// While it is ``Availability/unavailable`` or ``Availability/readOnly``, commits throw
    /// a `MirrorError` of that kind that names the zone, record type, scope and record
    /// ids, and store nothing; set it back to ``Availability/available`` to recover. An
    /// availability failure takes precedence over (and does not use up) the failures
    /// queued with ``failNextCommits(_:with:in:)``.
    ///
    /// For example:
    ///
    /// ```swift
    /// database.availability = .readOnly
    /// mirror.dataModel.append(item)        // stays pending; one error notification
    /// database.availability = .available   // the mirror's retry succeeds
    /// ```
    public var availability: Availability {
        get { faults.withLock { $0.availability } }
        set { faults.withLock { $0.availability = newValue } }
    }

    /// How long each commit of this instance waits before it is checked and applied;
    /// `.zero` at first.
    ///
    /// The wait is a `Task.sleep`: cancelling the committing task ends it, and the commit
    /// then throws `MirrorError.Kind.cancelled` and stores nothing. A new value applies to
    /// the commits already waiting, too: each waits until the time it started plus the
    /// latency now set, so setting it back to `.zero` lets them all go on at once.
    ///
    /// That makes a long latency a deterministic way to keep a commit in flight while the
    /// test looks at what happens meanwhile; observe the order of events, not the time they
    /// take:
    ///
    /// ```swift
    /// database.commitLatency = .seconds(3600)
    /// mirror.dataModel.append(record)
    /// try await database.commitsInProgressUpdates.waitUntil { $0 == 1 }
    /// #expect(mirror.pendingChanges.first?.isCommitting == true)
    /// database.commitLatency = .zero       // the commit goes on now
    /// try await mirror.waitUntilCommitted()
    /// ```
    public var commitLatency: Duration {
        get { faults.withLock { $0.commitLatency } }
        set { changeLatency { $0.commitLatency = newValue } }
    }

    /// How long each read of this instance (``fetchAll(in:)``, ``fetch(_:in:)``,
    /// ``changes(in:since:)``, ``currentToken(in:)``) waits before it runs; `.zero` at
    /// first.
    ///
    /// Like ``commitLatency``: a cancellable `Task.sleep` (a cancelled read throws
    /// `MirrorError.Kind.cancelled`), and a new value applies to the reads already
    /// waiting.
    public var readLatency: Duration {
        get { faults.withLock { $0.readLatency } }
        set { changeLatency { $0.readLatency = newValue } }
    }

    /// Makes the next `count` commits of this instance throw a `MirrorError` of `kind`.
    ///
    /// Exactly `count` commits fail, even when they run concurrently; the ones after them
    /// succeed (unless more failures are queued). A failed commit stores nothing, and its
    /// error names the record ids, record type and scope of the commit and says that it was
    /// injected. Calls add up in order: `failNextCommits(2, with: .ioFailure)` then
    /// `failNextCommits(1, with: .diskFull)` fails two commits with `.ioFailure` and the
    /// third with `.diskFull`.
    ///
    /// For example, check that code retries a transient failure:
    ///
    /// ```swift
    /// database.failNextCommits(2, with: .ioFailure)
    /// mirror.dataModel.append(item)
    /// try await database.commitLogUpdates.waitUntil { $0.last?.isApplied == true }
    /// #expect(database.commitLog.filter(\.isFailed).count == 2)
    /// ```
    ///
    /// - Parameters:
    ///   - count: How many commits fail; nothing is queued when it is 0 or less.
    ///   - kind: The kind of the errors, for example `MirrorError.Kind.ioFailure` (a
    ///     transient one) or `MirrorError.Kind.invalidRecord` (a permanent one).
    ///   - zone: Only commits to this zone fail (and count); `nil` for every zone.
    public func failNextCommits(_ count: Int = 1, with kind: MirrorError.Kind, in zone: ZoneID? = nil) {
        guard count > 0 else { return }
        faults.withLock { $0.failures.append(InjectedFailure(of: .commit, count: count, kind: kind, zone: zone)) }
    }

    /// Makes the next `count` reads of this instance throw a `MirrorError` of `kind`.
    ///
    /// Reads are ``fetchAll(in:)``, ``fetch(_:in:)``, ``changes(in:since:)`` and
    /// ``currentToken(in:)``. Otherwise the same as ``failNextCommits(_:with:in:)``.
    ///
    /// - Parameters:
    ///   - count: How many reads fail; nothing is queued when it is 0 or less.
    ///   - kind: The kind of the errors.
    ///   - zone: Only reads of this zone fail (and count); `nil` for every zone.
    public func failNextReads(_ count: Int = 1, with kind: MirrorError.Kind, in zone: ZoneID? = nil) {
        guard count > 0 else { return }
        faults.withLock { $0.failures.append(InjectedFailure(of: .read, count: count, kind: kind, zone: zone)) }
    }

    /// How many commit failures queued with ``failNextCommits(_:with:in:)`` are still to
    /// come.
    public var remainingCommitFailures: Int {
        faults.withLock { $0.failures.filter { $0.operation == .commit }.reduce(0) { $0 + $1.remaining } }
    }

    /// How many read failures queued with ``failNextReads(_:with:in:)`` are still to come.
    public var remainingReadFailures: Int {
        faults.withLock { $0.failures.filter { $0.operation == .read }.reduce(0) { $0 + $1.remaining } }
    }

    /// Removes every injected fault of this instance: queued failures, latencies, and
    /// makes it ``Availability/available`` again.
    ///
    /// Commits and reads waiting out their latency go on at once.
    public func removeAllFaults() {
        changeLatency { state in
            var cleared = FaultState()
            cleared.latencyWaiters = state.latencyWaiters
            cleared.nextLatencyWaiter = state.nextLatencyWaiter
            cleared.latencyGeneration = state.latencyGeneration
            state = cleared
        }
    }

    /// Changes the faults, then wakes the commits and reads waiting out their latency, so
    /// they wait again with the latency now set.
    private func changeLatency(_ change: (inout FaultState) -> Void) {
        let waiting = faults.withLock { state in
            change(&state)
            state.latencyGeneration += 1
            defer { state.latencyWaiters.removeAll() }
            return state.latencyWaiters.values
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Waits out the latency of a commit or read: until the time it started plus the
    /// latency set now, again whenever the latency changes.
    func injectLatency(of operation: FaultState.Operation, zone: ZoneID) async throws(MirrorError) {
        let start = ContinuousClock.now
        while true {
            let (latency, generation) = faults.withLock {
                (operation == .commit ? $0.commitLatency : $0.readLatency, $0.latencyGeneration)
            }
            guard latency > .zero else { return }
            let deadline = start.advanced(by: latency)
            guard ContinuousClock.now < deadline else { return }
            do {
                try await waitForLatencyChange(until: deadline, unlessChangedFrom: generation)
            } catch {
                throw MirrorError(
                    .cancelled,
                    "the \(operation) of \(zone) was cancelled during its injected latency of \(latency)",
                    recordType: zone.recordType, scope: zone.scope, underlying: error)
            }
        }
    }

    /// Returns at `deadline` or when a latency changes, whichever comes first.
    ///
    /// - Parameter generation: The ``FaultState/latencyGeneration`` the deadline was
    ///   computed with; returns at once when the latencies changed since.
    /// - Throws: `CancellationError` when the task is cancelled.
    private func waitForLatencyChange(
        until deadline: ContinuousClock.Instant, unlessChangedFrom generation: Int
    ) async throws {
        let key = faults.withLock { state in
            defer { state.nextLatencyWaiter += 1 }
            return state.nextLatencyWaiter
        }
        // Resumes the wait at the deadline; cancelled as soon as the wait ends.
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
            self?.faults.withLock { $0.latencyWaiters.removeValue(forKey: key) }?.resume()
        }
        defer { timer.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock, so that neither the latency nor cancellation can change
                // between the checks and the registration.
                let outcome: Result<Void, CancellationError>? = faults.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.latencyGeneration != generation || ContinuousClock.now >= deadline {
                        return .success(())
                    }
                    state.latencyWaiters[key] = LatencyWaiter(continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
            }
        } onCancel: {
            self.faults.withLock { $0.latencyWaiters.removeValue(forKey: key) }?.cancel()
        }
    }

    /// Throws the injected failure that is due for a commit or read, if any.
    func injectFailure(
        of operation: FaultState.Operation, zone: ZoneID, recordIDs: [String]
    ) throws(MirrorError) {
        let due: (kind: MirrorError.Kind, reason: String)? = faults.withLock { state in
            switch (state.availability, operation) {
            case (.unavailable, _):
                return (.unavailable, "the database is unavailable (availability = .unavailable)")
            case (.readOnly, .commit):
                return (.readOnly, "the database is read-only (availability = .readOnly)")
            case (.available, _), (.readOnly, .read):
                break
            }
            guard let index = state.failures.firstIndex(where: {
                $0.operation == operation && ($0.zone == nil || $0.zone == zone)
            }) else { return nil }
            let failure = state.failures[index]
            let ordinal = failure.count - failure.remaining + 1
            if failure.remaining == 1 {
                state.failures.remove(at: index)
            } else {
                state.failures[index].remaining -= 1
            }
            return (failure.kind, "injected failure \(ordinal) of \(failure.count) (\(failure.kind))")
        }
        guard let due else { return }
        let what: String
        switch operation {
        case .commit:
            what = "the commit of \(recordIDs.count) record\(recordIDs.count == 1 ? "" : "s") to \(zone)"
        case .read:
            what = "a read of \(zone)"
        }
        throw MirrorError(
            due.kind, "\(what) failed: \(due.reason)",
            recordIDs: recordIDs, recordType: zone.recordType, scope: zone.scope)
    }
}

/// The faults injected into one ``InMemoryDatabase`` instance.
struct FaultState: Sendable {
    /// What a fault applies to.
    enum Operation: String, Sendable, CustomStringConvertible {
        case commit
        case read

        var description: String { rawValue }
    }

    var availability = InMemoryDatabase.Availability.available
    var commitLatency = Duration.zero
    var readLatency = Duration.zero
    /// Queued failures, used up in order.
    var failures: [InjectedFailure] = []
    /// Grows with every change of the latencies.
    var latencyGeneration = 0
    /// The commits and reads waiting out their latency, woken when it changes.
    var latencyWaiters: [Int: LatencyWaiter] = [:]
    var nextLatencyWaiter = 0
}

/// A commit or read waiting out its injected latency.
struct LatencyWaiter: Sendable {
    let continuation: CheckedContinuation<Void, any Error>

    /// Ends the wait: the latency changed or its deadline passed.
    func resume() { continuation.resume() }

    /// Ends the wait because the waiting task was cancelled.
    func cancel() { continuation.resume(throwing: CancellationError()) }
}

/// Failures queued by `failNextCommits` or `failNextReads`.
struct InjectedFailure: Sendable {
    let operation: FaultState.Operation
    /// How many were queued.
    let count: Int
    let kind: MirrorError.Kind
    let zone: ZoneID?
    /// How many are still to come.
    var remaining: Int

    init(of operation: FaultState.Operation, count: Int, kind: MirrorError.Kind, zone: ZoneID?) {
        self.operation = operation
        self.count = count
        self.kind = kind
        self.zone = zone
        self.remaining = count
    }
}
