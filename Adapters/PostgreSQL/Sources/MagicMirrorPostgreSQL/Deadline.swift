import MagicMirror
import Synchronization

/// How long one round trip to the server (a commit, a read) may take before it is given up
/// as ``MirrorError/Kind/timedOut``, a transient error the mirror retries. A connection the
/// server dropped without a word (a crash, a network cut) would otherwise hold it forever.
let serverDeadline = Duration.seconds(30)

/// Runs `operation`, failing with ``MirrorError/Kind/timedOut`` (and cancelling it) when it
/// has not finished within `limit`. A commit given up this way may still land; its retry
/// is recognised by writer and timestamp.
func withDeadline<Value: Sendable>(
    _ limit: Duration, _ doing: String, _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        let pending = PendingContinuation(continuation)
        let work = Task {
            let result: Result<Value, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            pending.take()?.resume(with: result)
        }
        Task {
            try? await Task.sleep(for: limit)
            guard let continuation = pending.take() else { return }
            work.cancel()
            continuation.resume(throwing: MirrorError(.timedOut, "\(doing): no answer from the server within \(limit)"))
        }
    }
}

/// A continuation resumed by whichever comes first, the work or the deadline.
private final class PendingContinuation<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, any Error>?>
    init(_ continuation: CheckedContinuation<Value, any Error>) { self.continuation = Mutex(continuation) }
    /// The continuation, once; `nil` after the first call.
    func take() -> CheckedContinuation<Value, any Error>? { continuation.withLock { $0.take() } }
}
