import MagicMirror
import Synchronization

/// A result that arrives once, from any thread, and that one task awaits with a timeout.
///
/// The waiting helpers of this module are built on it: whoever sees the awaited event
/// calls ``resolve(_:)``; the waiter's timer resolves it with a time-out error and the
/// waiter's cancellation with a cancellation error, whichever comes first. No polling: the
/// waiting task is suspended on a continuation until one of the three happens.
final class Rendezvous<Value: Sendable>: Sendable {
    private enum State {
        /// Not resolved yet; the continuation of the waiting task once it waits.
        case pending(CheckedContinuation<Value, any Error>?)
        /// Resolved; later resolutions are ignored.
        case resolved(Result<Value, MirrorError>)
    }

    private let state = Mutex<State>(.pending(nil))
    /// Run once, by whoever resolves, before the waiter is resumed (cancels tasks, removes
    /// registrations).
    private let cleanup = Mutex<[@Sendable () -> Void]>([])

    init() {}

    /// Whether a result has arrived.
    var isResolved: Bool {
        state.withLock { if case .resolved = $0 { true } else { false } }
    }

    /// Adds work to run once when the rendezvous is resolved (at once if it already is).
    func onResolve(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if case .resolved = state { return true }
            cleanup.withLock { $0.append(action) }
            return false
        }
        if runNow { action() }
    }

    /// Delivers the result; does nothing when one was delivered already.
    ///
    /// - Returns: Whether this call delivered it.
    @discardableResult
    func resolve(_ result: Result<Value, MirrorError>) -> Bool {
        let outcome = state.withLock { state -> (resolved: Bool, waiter: CheckedContinuation<Value, any Error>?) in
            guard case .pending(let waiter) = state else { return (false, nil) }
            state = .resolved(result)
            return (true, waiter)
        }
        guard outcome.resolved else { return false }
        // Clean up first, so the waiter finds everything released when it resumes.
        let actions = cleanup.withLock { actions in
            defer { actions.removeAll() }
            return actions
        }
        for action in actions { action() }
        outcome.waiter?.resume(with: result.mapError { $0 as any Error })
        return true
    }

    /// Waits for the result.
    ///
    /// - Parameters:
    ///   - timeout: How long to wait before resolving with `timeoutError()`.
    ///   - timeoutError: The error to fail with on time-out, made when the time is up so it
    ///     can describe what was seen by then.
    /// - Throws: The delivered error, `timeoutError()`, or `MirrorError.Kind.cancelled`
    ///   when the waiting task is cancelled.
    func value(
        timeout: Duration, timeoutError: @escaping @Sendable () -> MirrorError
    ) async throws(MirrorError) -> Value {
        let timer = Task { [weak self] in
            // Cancelled as soon as the wait ends; a `Task.sleep` that throws means exactly that.
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self?.resolve(.failure(timeoutError()))
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let early = state.withLock { state -> Result<Value, MirrorError>? in
                        switch state {
                        case .resolved(let result):
                            return result
                        case .pending:
                            state = .pending(continuation)
                            return nil
                        }
                    }
                    if let early { continuation.resume(with: early.mapError { $0 as any Error }) }
                }
            } onCancel: {
                resolve(.failure(MirrorError(.cancelled, "the wait was cancelled")))
            }
        } catch let error as MirrorError {
            throw error
        } catch {
            throw MirrorError(.cancelled, "the wait ended: \(error)", underlying: error)
        }
    }
}
