import Dispatch
import Foundation
import Synchronization

/// The zone's group commit: a commit that finds no flusher running writes itself, on its
/// own thread; commits that arrive meanwhile wait in the queue and go together in the
/// flusher's next append (one append and one `fsync` for all of them).
extension JSONFileZone {
    /// A commit waiting for the zone's flusher.
    struct CommitRequest: Sendable {
        var operations: [RecordOperation]
        var durable: Bool
        var compactionThreshold: Int
        /// `nil` for the commit of a leader, which gets its result directly.
        var continuation: CheckedContinuation<CommitOutcome, any Error>?
    }

    /// What `queue` guards: the commits waiting for the flusher.
    struct CommitQueue {
        var pending: [CommitRequest] = []
        /// Whether a flusher is running; when `false`, `pending` is empty.
        var flushing = false
    }

    /// Commits validated operations; returns once they are appended (and flushed, when
    /// `durable`) and subscribers were told.
    ///
    /// A commit that finds no flusher running writes itself, on its own thread, with no
    /// continuation and no thread hop. Commits that arrive while a flusher writes wait in
    /// the queue and go together in its next append (group commit).
    func commit(
        _ operations: [RecordOperation], durable: Bool, compactionThreshold: Int
    ) async throws -> CommitOutcome {
        try MirrorError.beforeStoring { () throws(MirrorError) in try load() }
        let leads = queue.withLock { queue -> Bool in
            if queue.flushing { return false }
            queue.flushing = true
            return true
        }
        if leads {
            let request = CommitRequest(
                operations: operations, durable: durable, compactionThreshold: compactionThreshold,
                continuation: nil)
            if let (results, _) = process([request], mayWait: false) {
                finishLeading()
                return try results[0].get()
            }
            // Another process holds the zone: wait on a dispatch thread, not on this one.
            return try await withCheckedThrowingContinuation { continuation in
                var waiting = request
                waiting.continuation = continuation
                queue.withLock { $0.pending.insert(waiting, at: 0) }
                DispatchQueue.global().async { self.runFlusher() }
            }
        }
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(CommitRequest(
                operations: operations, durable: durable, compactionThreshold: compactionThreshold,
                continuation: continuation))
        }
    }

    /// Queues a commit; if the flusher finished meanwhile, starts one on a dispatch thread.
    private func enqueue(_ request: CommitRequest) {
        let (starts, waiting) = queue.withLock { queue -> (Bool, Int) in
            queue.pending.append(request)
            if queue.flushing { return (false, queue.pending.count) }
            queue.flushing = true
            return (true, queue.pending.count)
        }
        if let observer = context.queueObserver { observer(zone, waiting) }
        if starts { DispatchQueue.global().async { self.runFlusher() } }
    }

    /// Ends a leader's turn: hands commits that queued meanwhile to a dispatch thread.
    private func finishLeading() {
        let more = queue.withLock { queue -> Bool in
            if queue.pending.isEmpty {
                queue.flushing = false
                return false
            }
            return true
        }
        if more { DispatchQueue.global().async { self.runFlusher() } }
    }

    /// Drains the queue, on a dispatch thread.
    private func runFlusher() {
        while true {
            let batch = queue.withLock { queue -> [CommitRequest] in
                if queue.pending.isEmpty {
                    queue.flushing = false
                    return []
                }
                defer { queue.pending.removeAll() }
                return queue.pending
            }
            if batch.isEmpty { return }
            guard let (results, leftover) = process(batch, mayWait: true) else {
                queue.withLock { $0.pending.insert(contentsOf: batch, at: 0) }
                continue
            }
            for (index, result) in results.enumerated() {
                batch[index].continuation?.resume(with: result.mapError { $0 as any Error })
            }
            queue.withLock { $0.pending.insert(contentsOf: leftover, at: 0) }
        }
    }
}
