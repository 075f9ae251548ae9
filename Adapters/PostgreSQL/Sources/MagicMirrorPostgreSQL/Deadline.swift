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
    try await deadlined(limit, "\(doing): no answer from the server within \(limit)") { _ in try await operation() }
}

/// How far an operation under ``withProgressDeadline(_:_:_:)`` has come: each step (a page
/// of a zone) calls ``advance()``, which gives the next step the whole limit.
final class DeadlineProgress: Sendable {
    private let last = Mutex(ContinuousClock.now)
    /// A step is done: the deadline is `limit` from now.
    func advance() { last.withLock { $0 = .now } }
    var lastStep: ContinuousClock.Instant { last.withLock { $0 } }
}

/// Runs `operation`, failing with ``MirrorError/Kind/timedOut`` (and cancelling it) when
/// `limit` passes without a step: from the start to the first ``DeadlineProgress/advance()``,
/// or between two. An operation of many steps (the pages of a large zone) takes as long as it
/// needs while each step comes within `limit`.
func withProgressDeadline<Value: Sendable>(
    _ limit: Duration, _ doing: String, _ operation: @escaping @Sendable (DeadlineProgress) async throws -> Value
) async throws -> Value {
    try await deadlined(limit, "\(doing): no answer from the server within \(limit) (for one page)", operation)
}

/// Runs `operation` until it ends, or until `limit` passed since it started or last advanced
/// (then cancelling it and failing with `timedOut`, saying `message`). The deadline is one of
/// the process's ``Ticker`` checks, not a timer of its own: an operation costs no task but
/// its own.
private func deadlined<Value: Sendable>(
    _ limit: Duration, _ message: String, _ operation: @escaping @Sendable (DeadlineProgress) async throws -> Value
) async throws -> Value {
    let progress = DeadlineProgress()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        let pending = PendingContinuation(continuation)
        let work = Task {
            let result: Result<Value, any Error>
            do { result = .success(try await operation(progress)) } catch { result = .failure(error) }
            pending.take()?.resume(with: result)
        }
        Ticker.shared.add { now in
            // Done once the work answered, or the deadline did.
            guard !pending.isTaken else { return true }
            guard now >= progress.lastStep + limit else { return false }
            guard let continuation = pending.take() else { return true }
            work.cancel()
            continuation.resume(throwing: MirrorError(.timedOut, message))
            return true
        }
    }
}

/// One task for the process that calls registered checks every ``interval`` while any is
/// registered: the deadlines of operations, the waits of connection leases. A check returns
/// `true` when it is done. Thousands of operations a second then cost one wake-up per
/// interval, not a timer each.
final class Ticker: Sendable {
    static let shared = Ticker(interval: .milliseconds(100))

    let interval: Duration
    private struct State {
        var checks: [Int: @Sendable (ContinuousClock.Instant) -> Bool] = [:]
        var next = 0
        var running = false
    }
    private let state = Mutex(State())

    init(interval: Duration) { self.interval = interval }

    /// Calls `check` with the time at each tick until it returns `true`.
    func add(_ check: @escaping @Sendable (ContinuousClock.Instant) -> Bool) {
        let start = state.withLock { state -> Bool in
            state.next += 1
            state.checks[state.next] = check
            guard !state.running else { return false }
            state.running = true
            return true
        }
        if start { Task { await self.run() } }
    }

    private func run() async {
        while true {
            try? await Task.sleep(for: interval)
            guard let checks = state.withLock({ state -> [(Int, @Sendable (ContinuousClock.Instant) -> Bool)]? in
                guard !state.checks.isEmpty else {
                    state.running = false
                    return nil
                }
                return Array(state.checks)
            }) else { return }
            let now = ContinuousClock.now
            let done = checks.filter { $0.1(now) }.map(\.0)
            if !done.isEmpty { state.withLock { state in for id in done { state.checks[id] = nil } } }
        }
    }
}

/// A continuation resumed by whichever comes first, the work or the deadline.
private final class PendingContinuation<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, any Error>?>
    init(_ continuation: CheckedContinuation<Value, any Error>) { self.continuation = Mutex(continuation) }
    /// The continuation, once; `nil` after the first call.
    func take() -> CheckedContinuation<Value, any Error>? { continuation.withLock { $0.take() } }
    /// Whether the continuation was taken.
    var isTaken: Bool { continuation.withLock { $0 == nil } }
}
