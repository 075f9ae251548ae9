import Foundation
import Synchronization

/// Counts events by key and lets a test wait, with a timeout, until a key has been seen a
/// number of times — without polling: a waiter is resumed by the event itself.
final class EventRecorder<Key: Hashable & Sendable>: Sendable {
    private struct Waiter {
        let key: Key
        let count: Int
        let continuation: CheckedContinuation<Bool, Never>
        let timeout: Task<Void, Never>
    }

    private struct State {
        var counts: [Key: Int] = [:]
        var order: [Key] = []
        var nextWaiter = 0
        var waiters: [Int: Waiter] = [:]
    }

    private let state = Mutex(State())

    init() {}

    /// Records one event for `key` and wakes the waiters it satisfies.
    func record(_ key: Key) {
        let satisfied: [Waiter] = state.withLock { state in
            state.counts[key, default: 0] += 1
            state.order.append(key)
            let count = state.counts[key]!
            let ready = state.waiters.filter { $0.value.key == key && $0.value.count <= count }
            for id in ready.keys { state.waiters[id] = nil }
            return Array(ready.values)
        }
        for waiter in satisfied {
            waiter.timeout.cancel()
            waiter.continuation.resume(returning: true)
        }
    }

    /// How many events were recorded for `key`.
    func count(_ key: Key) -> Int { state.withLock { $0.counts[key, default: 0] } }

    /// Every event recorded, in order.
    var events: [Key] { state.withLock { $0.order } }

    /// Waits until `key` has been recorded at least `count` times; `false` after `timeout`.
    func wait(for key: Key, count: Int = 1, timeout: Duration = testTimeout) async -> Bool {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.counts[key, default: 0] >= count {
                    continuation.resume(returning: true)
                    return
                }
                let id = state.nextWaiter
                state.nextWaiter += 1
                let timeout = Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    self?.expire(id)
                }
                state.waiters[id] = Waiter(
                    key: key, count: count, continuation: continuation, timeout: timeout)
            }
        }
    }

    private func expire(_ id: Int) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: false)
    }
}
