import Foundation
import Observation

// Committing: waiting for changes to be durable, the changes still waiting, dropping one,
// failures and the conflict policy.

extension Mirror {
    /// Returns when every change made before the call is committed (or settled by the
    /// conflict policy, which may drop it in favour of another writer's change).
    ///
    /// Changes waiting for a retry are tried again at once, including those put on hold
    /// after a failure that retrying cannot fix. Such a change that fails again the same way
    /// (same kind and message) makes the flush throw, but is not reported again (as a
    /// notification, on ``errors()``): it is the failure already reported.
    ///
    /// ```swift
    /// mirror.dataModel.append(todo)
    /// try await mirror.flush()   // the new record is durable now
    /// ```
    ///
    /// - Throws: The ``MirrorError`` of a change made before the call that could not be
    ///   committed. The change stays pending and keeps being retried when the failure is
    ///   transient. ``MirrorError/Kind/cancelled`` when the calling task is cancelled.
    public func flush() async throws {
        // Changes of users this mirror switched away from, still being committed.
        let earlierUsers = account.unfinishedFinishers()
        let number = core.withLock { $0.delivery.makeNumber() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                core.withLock { $0.addFlushWaiter(number, continuation) }
                commitWakeup.signal()
            }
        } onCancel: {
            // A user switch hands the flushes waiting for the old user's changes to the
            // mirror that finishes its commits.
            let core = core
            let account = account
            Mirror.runOnAnotherThread {
                if !core.withLock({ $0.cancelFlushWaiter(number) }) { account.cancelFlushWaiter(number) }
            }
        }
        for finisher in earlierUsers { try await finisher.flush() }
    }

    /// Runs `work`, which takes the mirror's lock, on another thread.
    ///
    /// For cancellation and termination handlers: they run while the cancelled task's own
    /// lock is held, and a thread that holds the mirror's lock may be resuming that very task
    /// (a change handed to a stream, a flush completed), which needs the task's lock. Taking
    /// the mirror's lock in the handler would make each thread wait for the other for ever.
    static func runOnAnotherThread(_ work: @escaping @Sendable () -> Void) {
        DispatchQueue.global().async(execute: work)
    }

    /// The local changes not committed yet, oldest first.
    public var pendingChanges: [PendingChange] {
        core.withLock { $0.queue.pendingChanges }
    }

    /// Drops the local change of one record that is waiting to be committed, and shows the
    /// record as the mirror last knew it stored again: its stored value, or no record when it
    /// was never stored.
    ///
    /// Use it for a change that cannot be committed (a record the database refuses, put on
    /// hold after its failure was reported, which makes every ``flush()`` throw) or that you
    /// no longer want:
    ///
    /// ```swift
    /// for change in mirror.pendingChanges where change.isOnHold {
    ///     mirror.discardPendingChange(recordID: change.recordID)
    /// }
    /// try await mirror.flush()   // no longer throws for the discarded changes
    /// ```
    ///
    /// A record that another writer changed meanwhile shows as the mirror last read it, and
    /// its newer value arrives like any remote change. When an earlier attempt to commit the
    /// change failed without the guarantee that nothing was stored
    /// (``MirrorError/nothingStored``), the mirror reads the database again, so `dataModel`
    /// shows the change if it was stored after all.
    ///
    /// - Parameter recordID: The id of the record whose change to drop.
    /// - Returns: `true` when a waiting change was dropped; `false` when the record has no
    ///   waiting change, or its change is being committed at this moment (it is then either
    ///   stored, or waits again and can be dropped once ``pendingChanges`` no longer shows
    ///   it as committing).
    @discardableResult
    public func discardPendingChange(recordID: String) -> Bool {
        guard let taken = core.withLock({ $0.discardable(recordID) }) else { return false }
        return discard(taken)
    }

    /// Drops the refused changes taken by ``SyncEngine/commitRefused(_:error:blamed:now:)``,
    /// showing their records as stored, and reports the refusal (see
    /// ``SyncEngine/settleRefusal(_:error:)``).
    func settleRefusal(_ refused: [SyncEngine<Record>.Conflict], error: MirrorError) {
        let stored = refused.map { keepStored($0.current) }
        changingDataModel { engine in engine.settleRefusal(Array(zip(refused, stored)), error: error) }
        pullWakeup.signal()
        commitWakeup.signal()
    }

    /// Drops a waiting change taken with ``SyncEngine/discardable(_:)`` and shows the record
    /// as stored, unless it changed since.
    ///
    /// - Returns: Whether it was dropped.
    private func discard(_ taken: SyncEngine<Record>.Conflict) -> Bool {
        let stored = keepStored(taken.current)
        let dropped = changingDataModel { engine in engine.discard(taken, showing: stored) }
        if dropped {
            pullWakeup.signal()
            commitWakeup.signal()
        }
        return dropped
    }

    /// Whether any local change is not committed yet.
    public var hasPendingChanges: Bool {
        core.withLock { !$0.queue.isEmpty }
    }

    /// The most recent failure, or `nil` if nothing failed yet. A later success does not
    /// clear it; ``pendingChanges`` says what is still waiting.
    public var lastError: MirrorError? {
        registrar.access(self, keyPath: lastErrorKey)
        return core.withLock { $0.delivery.lastError }
    }

    /// How conflicts with other writers are settled; ``ConflictPolicy/changedKeys`` unless
    /// set otherwise. A new policy applies to the conflicts found after it is set.
    public var conflictPolicy: ConflictPolicy<Record> {
        get { core.withLock { $0.policy } }
        set { core.withLock { $0.policy = newValue } }
    }
}
