import Synchronization

/// Lets one task at a time through, in the order they came: the exchanges of the background
/// task and of ``ReplicatedDatabase/synchronize()`` never overlap; a database adapter's
/// uses of one connection never overlap.
///
/// Waiting is not cancellable: hold the gate only around work that ends.
@_spi(DatabaseImplementation)
public final class AsyncGate: Sendable {
    private let state = Mutex<(busy: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A free gate.
    public init() {}

    /// Waits until the gate is free and takes it.
    public func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enter = state.withLock { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if enter { continuation.resume() }
        }
    }

    /// Takes the gate if it is free; returns whether it did.
    public func tryAcquire() -> Bool {
        state.withLock { state in
            guard !state.busy else { return false }
            state.busy = true
            return true
        }
    }

    /// Frees the gate, handing it to the next waiter.
    public func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
