import Foundation
import MagicMirror
import Synchronization

/// Collects the `MirrorError`s posted as `.mirrorError` notifications, for assertions.
///
/// MagicMirror posts exactly one notification named `.mirrorError`, with the error as
/// `object`, for every failure of work that runs in the background. Make a recorder before
/// the code under test runs, then check what it collected:
///
/// ```swift
/// let recorder = ErrorNotificationRecorder(recordType: SampleRecord.recordType)
/// database.failNextCommits(1, with: .diskFull)
/// mirror.dataModel.append(SampleRecord(title: "Milk"))
/// let errors = try await recorder.waitForErrors(count: 1)
/// #expect(errors.map(\.kind) == [.diskFull])
/// ```
///
/// The recorder observes until ``stop()`` is called or it is deallocated.
///
/// > Important: Tests run in parallel in one process and share
/// > `NotificationCenter.default`. Filter by something only your test uses (a record
/// > type, with ``init(center:recordType:scope:kinds:)``) or observe a center of your own,
/// > or the recorder also collects other tests' errors.
public final class ErrorNotificationRecorder: Sendable {
    private struct State: Sendable {
        var errors: [MirrorError] = []
        /// Notifications named `.mirrorError` whose object was not a `MirrorError`.
        var malformed = 0
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private struct Waiter: Sendable {
        let count: Int
        let rendezvous: Rendezvous<[MirrorError]>
    }

    private let state = Mutex(State())
    private let filter: @Sendable (MirrorError) -> Bool
    /// The center and the observation token; `nil` once stopped.
    ///
    /// `NotificationCenter` and its observer tokens are not `Sendable` on every platform;
    /// they are only touched under this lock, and `NotificationCenter` itself is
    /// thread-safe.
    private let observation: Mutex<Observation?>

    /// Wraps the center and the observer token so they can live behind the lock.
    private struct Observation: @unchecked Sendable {
        // Safe: `NotificationCenter` is documented as thread-safe, and the token is only
        // passed back to it, under the recorder's lock.
        let center: NotificationCenter
        let token: any NSObjectProtocol
    }

    /// Starts recording the errors posted on `center` that pass `filter`.
    ///
    /// - Parameters:
    ///   - center: The center to observe; `.default` (where MagicMirror posts) by default.
    ///   - filter: Which errors to record; all of them by default. Called on the posting
    ///     thread; it must not block.
    public init(
        center: NotificationCenter = .default,
        filter: @escaping @Sendable (MirrorError) -> Bool = { _ in true }
    ) {
        self.filter = filter
        self.observation = Mutex(nil)
        let token = center.addObserver(forName: .mirrorError, object: nil, queue: nil) {
            [weak self] notification in
            self?.receive(notification.object)
        }
        observation.withLock { $0 = Observation(center: center, token: token) }
    }

    /// Starts recording the errors posted on `center` about one record type.
    ///
    /// - Parameters:
    ///   - center: The center to observe; `.default` by default.
    ///   - recordType: Record only errors whose `MirrorError.recordType` is this.
    ///   - scope: Record only errors of this scope; any scope when `nil`.
    ///   - kinds: Record only errors of these kinds; any kind when `nil`.
    public convenience init(
        center: NotificationCenter = .default, recordType: String, scope: Scope? = nil,
        kinds: Set<MirrorError.Kind>? = nil
    ) {
        self.init(center: center) { error in
            error.recordType == recordType
                && (scope == nil || error.scope == scope)
                && (kinds?.contains(error.kind) ?? true)
        }
    }

    deinit { stop() }

    /// The errors recorded so far, in the order they were posted.
    public var errors: [MirrorError] { state.withLock { $0.errors } }

    /// How many errors were recorded so far.
    public var count: Int { state.withLock { $0.errors.count } }

    /// How many `.mirrorError` notifications arrived whose `object` was not a
    /// `MirrorError` (and were therefore not recorded). Always 0 for notifications that
    /// MagicMirror posts.
    public var malformedCount: Int { state.withLock { $0.malformed } }

    /// Forgets the errors recorded so far; waits already in progress count from zero.
    public func reset() {
        state.withLock { state in
            state.errors.removeAll()
            state.malformed = 0
        }
    }

    /// Stops observing; the errors recorded so far stay. Calling it again does nothing.
    public func stop() {
        let ended = observation.withLock { observation in
            defer { observation = nil }
            return observation
        }
        if let ended { ended.center.removeObserver(ended.token) }
    }

    /// Waits until at least `count` errors were recorded, and returns every error recorded
    /// by then.
    ///
    /// The wait is suspended on the notifications themselves (no polling): it ends as soon
    /// as the `count`th error arrives.
    ///
    /// To check that exactly one error is posted for a failure, wait for one, then make
    /// something else happen that comes after any duplicate would have, and check
    /// ``count`` is still 1.
    ///
    /// - Parameters:
    ///   - count: How many errors to wait for (counting those recorded already).
    ///   - timeout: How long to wait.
    /// - Returns: Every error recorded so far (at least `count`).
    /// - Throws: `MirrorError.Kind.timedOut` when fewer than `count` errors arrived in
    ///   time; its message says how many did and what they were.
    ///   `MirrorError.Kind.cancelled` when the waiting task is cancelled.
    @discardableResult
    public func waitForErrors(
        count: Int = 1, timeout: Duration = .seconds(10)
    ) async throws(MirrorError) -> [MirrorError] {
        let rendezvous = Rendezvous<[MirrorError]>()
        let key = state.withLock { state -> Int? in
            guard state.errors.count < count else { return nil }
            let key = state.nextWaiter
            state.nextWaiter += 1
            state.waiters[key] = Waiter(count: count, rendezvous: rendezvous)
            return key
        }
        guard let key else { return errors }
        rendezvous.onResolve { [weak self] in
            _ = self?.state.withLock { $0.waiters.removeValue(forKey: key) }
        }
        return try await rendezvous.value(timeout: timeout) { [weak self] in
            let arrived = self?.errors ?? []
            var message = "timed out after \(timeout) waiting for \(count) error notification"
                + "\(count == 1 ? "" : "s"); \(arrived.count) arrived"
            if !arrived.isEmpty {
                message += ": " + arrived.map(\.description).joined(separator: " | ")
            }
            return MirrorError(.timedOut, message)
        }
    }

    /// Records one notification's object, on the posting thread.
    private func receive(_ object: Any?) {
        guard let error = object as? MirrorError else {
            state.withLock { $0.malformed += 1 }
            return
        }
        guard filter(error) else { return }
        let due = state.withLock { state -> [(Rendezvous<[MirrorError]>, [MirrorError])] in
            state.errors.append(error)
            let errors = state.errors
            return state.waiters.values.filter { $0.count <= errors.count }.map { ($0.rendezvous, errors) }
        }
        for (rendezvous, errors) in due { rendezvous.resolve(.success(errors)) }
    }
}
