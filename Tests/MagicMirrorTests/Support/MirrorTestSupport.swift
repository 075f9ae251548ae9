import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// The record type of the mirror tests.
struct Chore: Recordable, CustomStringConvertible {
    var id: String = UUID().uuidString
    var title: String
    var notes: String = ""
    var done = false
    var rank = 0

    var description: String { "\(title)\(done ? " ✓" : "")[\(notes)|\(rank)]" }
}

/// How long a test waits for something that should happen before it fails: generous, since a
/// wait ends as soon as the event comes and the machine may be busy (no test bounds latency).
/// Two minutes: with the whole suite running on two saturated cores, a chain of retries with
/// backoff took over 60 s to end (and every suite's limit is five minutes).
let testTimeout: Duration = .seconds(120)

/// A wait that ran out of time.
struct TimedOut: Error, CustomStringConvertible {
    let description: String
}

/// Collects values from any thread and lets a test wait, with a timeout, until they satisfy
/// a condition.
final class AsyncCollector<Element: Sendable>: Sendable {
    private struct Waiter {
        let condition: @Sendable ([Element], Bool) -> Bool
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var items: [Element] = []
        var isFinished = false
        var waiters: [Int: Waiter] = [:]
        var next = 0
    }

    private let state = Mutex(State())
    private let reader = Mutex<Task<Void, Never>?>(nil)

    init() {}

    /// A collector of everything `sequence` yields; ``isFinished`` once it ends.
    init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Element {
        let task = Task { [weak self] in
            do {
                for try await element in sequence { self?.append(element) }
            } catch {}
            self?.finish()
        }
        reader.withLock { $0 = task }
    }

    deinit { reader.withLock { $0?.cancel() } }

    func append(_ element: Element) {
        update { $0.items.append(element) }
    }

    /// Marks the end of the values.
    func finish() {
        update { $0.isFinished = true }
    }

    private func update(_ change: (inout State) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            change(&state)
            var ready: [CheckedContinuation<Void, any Error>] = []
            for (number, waiter) in state.waiters where waiter.condition(state.items, state.isFinished) {
                ready.append(waiter.continuation)
                state.waiters[number] = nil
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    var items: [Element] { state.withLock { $0.items } }
    var isFinished: Bool { state.withLock { $0.isFinished } }

    /// Waits until the collected values satisfy `condition`.
    ///
    /// - Throws: ``TimedOut`` showing the values collected, after `timeout`.
    func wait(
        _ what: String, timeout: Duration = testTimeout, until condition: @escaping @Sendable ([Element]) -> Bool
    ) async throws {
        try await wait(what, timeout: timeout) { items, _ in condition(items) }
    }

    /// Waits until the sequence ended.
    func waitForEnd(_ what: String, timeout: Duration = testTimeout) async throws {
        try await wait(what, timeout: timeout) { _, finished in finished }
    }

    /// Waits until at least `count` values are collected.
    func wait(forCount count: Int, _ what: String, timeout: Duration = testTimeout) async throws {
        try await wait(what, timeout: timeout) { $0.count >= count }
    }

    private func wait(
        _ what: String, timeout: Duration, condition: @escaping @Sendable ([Element], Bool) -> Bool
    ) async throws {
        let number = state.withLock { state in
            state.next += 1
            return state.next
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expire(number, what)
        }
        defer { timer.cancel() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let satisfied = state.withLock { state in
                if condition(state.items, state.isFinished) { return true }
                state.waiters[number] = Waiter(condition: condition, continuation: continuation)
                return false
            }
            if satisfied { continuation.resume() }
        }
    }

    private func expire(_ number: Int, _ what: String) {
        let (waiter, items) = state.withLock { state in
            (state.waiters.removeValue(forKey: number), state.items)
        }
        let shown = items.suffix(20).map { "\($0)" }.joined(separator: "\n  ")
        waiter?.continuation.resume(throwing: TimedOut(
            description: "timed out waiting for \(what); collected \(items.count):\n  \(shown)"))
    }
}

/// Waits until a mirror's records satisfy `condition` (MirrorTesting's `Mirror.waitUntil`).
///
/// - Throws: `MirrorError.Kind.timedOut` showing the last records seen.
func waitUntil<Record: Recordable>(
    _ mirror: Mirror<Record>, _ what: String, timeout: Duration = testTimeout,
    _ condition: @escaping @Sendable ([Record]) -> Bool
) async throws {
    try await mirror.waitUntil(timeout: timeout, what) { condition($0.array) }
}

/// Collects the `.mirrorError` notifications that match a condition (tests run in
/// parallel, so each test matches only its own errors, usually by record id).
final class ErrorNotificationCollector: Sendable {
    let errors = AsyncCollector<MirrorError>()
    private let observer: Mutex<(any NSObjectProtocol)?>

    init(matching condition: @escaping @Sendable (MirrorError) -> Bool) {
        let errors = self.errors
        observer = Mutex(NotificationCenter.default.addObserver(
            forName: .mirrorError, object: nil, queue: nil
        ) { notification in
            guard let error = notification.object as? MirrorError, condition(error) else { return }
            errors.append(error)
        })
    }

    /// Collects the errors that name one of `recordIDs`.
    convenience init(naming recordIDs: [String]) {
        let wanted = Set(recordIDs)
        self.init { !wanted.isDisjoint(with: $0.recordIDs) }
    }

    var count: Int { errors.items.count }

    deinit {
        if let observer = observer.withLock({ $0 }) { NotificationCenter.default.removeObserver(observer) }
    }
}

/// The stored live records of a zone, by id, decoded as `Record`.
func storedRecords<Record: Recordable>(
    _ type: Record.Type, in database: any RecordDatabase, scope: Scope = .public
) async throws -> [String: Record] {
    let set = try await database.fetchAll(in: .public(Record.recordType))
    var result: [String: Record] = [:]
    for stored in set.records {
        result[stored.id] = try JSONDecoder().decode(Record.self, from: stored.fields!)
    }
    return result
}

/// Saves records into a database directly, as another program would.
func seed<Record: Recordable>(_ records: [Record], into database: any RecordDatabase) async throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let operations = try records.map { record in
        RecordOperation.save(
            record.recordID, fields: try encoder.encode(record), baseVersion: 0,
            timestamp: HybridLogicalClock.shared.now())
    }
    try await database.commit(operations, to: .public(Record.recordType))
}

/// Retry settings that make the retry tests quick.
let quickRetries = MirrorConfiguration(retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(50))

/// Holds an object weakly.
final class WeakBox<Object: AnyObject>: @unchecked Sendable {
    // @unchecked Sendable: only used to test deallocation; `object` is written once.
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

/// Expects `body` to throw a ``MirrorError`` of `kind`, and returns it.
@discardableResult
func expectMirrorError<Value>(
    _ kind: MirrorError.Kind, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Value
) async -> MirrorError? {
    do {
        _ = try await body()
        Issue.record("expected MirrorError.\(kind); nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as MirrorError {
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected MirrorError.\(kind); got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The error `mirror.flush()` throws; records an issue and throws when it does not throw.
func flushFailure<Record: Recordable>(of mirror: Mirror<Record>) async throws -> MirrorError {
    do {
        try await mirror.flush()
    } catch let error as MirrorError {
        return error
    }
    Issue.record("flush() did not throw")
    throw CancellationError()
}
