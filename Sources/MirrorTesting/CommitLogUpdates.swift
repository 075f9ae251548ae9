import MagicMirror
import Synchronization

extension InMemoryDatabase {
    /// The commit log of an ``InMemoryDatabase`` now, then again each time it changes: an
    /// `AsyncSequence` returned by ``InMemoryDatabase/commitLogUpdates``.
    ///
    /// The first element is the log as it is when iteration starts; each later element is
    /// the whole log after one or more commits (a reader that falls behind gets the latest
    /// log, so no entry is ever missed, only intermediate states). Clearing the log
    /// (``InMemoryDatabase/clearCommitLog()``) delivers it empty.
    ///
    /// Nothing is registered with the database between two calls to `next()`, so an
    /// abandoned iteration leaves nothing behind. Cancelling the iterating task ends the
    /// sequence.
    public struct CommitLogUpdates: AsyncSequence, Sendable {
        /// The whole commit log.
        public typealias Element = [CommitLogEntry]

        let store: Store

        /// Reads the log as it changes.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let store: Store
            /// The version of the log returned last; `nil` before the first element.
            var seenVersion: Int?

            /// The log, when it changed since the last call (at once on the first call).
            ///
            /// - Returns: The whole log, or `nil` when the task is cancelled.
            public mutating func next() async -> [CommitLogEntry]? {
                guard !Task.isCancelled else { return nil }
                let store = store
                let seen = seenVersion
                let waiter = Mutex<Int?>(nil)
                let latest: (log: [CommitLogEntry], version: Int)? = await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        store.contents.withLock { contents in
                            if seen != contents.logVersion || Task.isCancelled {
                                continuation.resume(returning: Task.isCancelled ? nil : (contents.log, contents.logVersion))
                                return
                            }
                            let key = contents.nextLogWaiter
                            contents.nextLogWaiter += 1
                            contents.logWaiters[key] = continuation
                            waiter.withLock { $0 = key }
                        }
                    }
                } onCancel: {
                    store.contents.withLock { contents in
                        guard let key = waiter.withLock({ $0 }),
                              let continuation = contents.logWaiters.removeValue(forKey: key)
                        else { return }
                        continuation.resume(returning: nil)
                    }
                }
                guard let latest else { return nil }
                seenVersion = latest.version
                return latest.log
            }
        }

        /// Starts reading; the first call to `next()` returns the log as it is then.
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(store: store, seenVersion: nil)
        }
    }
}
