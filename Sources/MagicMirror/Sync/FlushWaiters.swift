/// The `flush()` calls waiting for a mirror's changes: each waits until every change up to
/// its target sequence number is committed, or one of them fails.
///
/// Generic over what stands for a waiting call (a continuation in a mirror), so that the
/// rules are tested without tasks.
struct FlushWaiters<Waiter> {
    private var waiters: [Int: (target: Int, waiter: Waiter)] = [:]

    var isEmpty: Bool { waiters.isEmpty }

    /// Adds a waiting flush, numbered `number`, for the changes up to `target`.
    mutating func add(_ number: Int, target: Int, _ waiter: Waiter) {
        waiters[number] = (target, waiter)
    }

    /// Removes the flush numbered `number`, if it waits here.
    mutating func remove(_ number: Int) -> Waiter? {
        waiters.removeValue(forKey: number)?.waiter
    }

    /// Whether a waiting flush waits for the change numbered `sequence`.
    func waitFor(_ sequence: Int) -> Bool {
        waiters.values.contains { $0.target >= sequence }
    }

    /// Removes every waiting flush.
    mutating func removeAll() -> [Waiter] {
        defer { waiters.removeAll() }
        return waiters.values.map(\.waiter)
    }

    /// Removes and returns the flushes that are done, each with how it ends: every change it
    /// waits for is committed (`oldestPending`, the oldest change still waiting, is past its
    /// target), or `failure` failed one of them (`failure.sequence` is the oldest failed
    /// change).
    mutating func finished(
        oldestPending: Int?, failure: (error: MirrorError, sequence: Int)?
    ) -> [(Waiter, MirrorError?)] {
        guard !waiters.isEmpty else { return [] }
        var done: [(Waiter, MirrorError?)] = []
        for (number, entry) in waiters {
            if oldestPending.map({ $0 > entry.target }) ?? true {
                waiters[number] = nil
                done.append((entry.waiter, nil))
            } else if let failure, failure.sequence <= entry.target {
                waiters[number] = nil
                done.append((entry.waiter, failure.error))
            }
        }
        return done
    }
}
