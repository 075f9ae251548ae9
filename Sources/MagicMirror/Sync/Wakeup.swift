import Synchronization

/// A one-consumer wake-up signal: ``wait(until:)`` returns when ``signal()`` was called
/// since the last wait, when the deadline passes, or when the waiting task is cancelled.
///
/// Signals do not accumulate: several signals before a wait wake it once.
final class Wakeup: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        var waiterNumber = 0
        var timer: Task<Void, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Wakes the waiter, or the next wait if nobody waits now.
    func signal() {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            guard let waiter = state.waiter else {
                state.signalled = true
                return (nil, nil)
            }
            state.waiter = nil
            defer { state.timer = nil }
            return (waiter, state.timer)
        }
        timer?.cancel()
        waiter?.resume()
    }

    /// Waits for a signal, or until `deadline` when one is given.
    func wait(until deadline: ContinuousClock.Instant? = nil) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let number: Int? = state.withLock { state in
                    if state.signalled || Task.isCancelled {
                        state.signalled = false
                        return nil
                    }
                    state.waiter = continuation
                    state.waiterNumber += 1
                    return state.waiterNumber
                }
                guard let number else {
                    continuation.resume()
                    return
                }
                guard let deadline else { return }
                let timer = Task { [weak self] in
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    self?.expire(number)
                }
                state.withLock { state in
                    if state.waiterNumber == number, state.waiter != nil { state.timer = timer } else { timer.cancel() }
                }
            }
        } onCancel: {
            signal()
        }
    }

    private func expire(_ number: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.waiterNumber == number, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.timer = nil
            return waiter
        }
        waiter?.resume()
    }
}
