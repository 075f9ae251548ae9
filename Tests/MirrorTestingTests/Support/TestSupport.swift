import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// Encodes a small JSON object for tests.
func fields(_ object: [String: any Sendable]) -> Data {
    try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
}

/// A new clock reading.
func now() -> HLCTimestamp { HybridLogicalClock.shared.now() }

/// A save of a new record (based on version 0).
func newRecord(_ id: String, _ object: [String: any Sendable] = ["v": 1], base: Int = 0) -> RecordOperation {
    .save(id, fields: fields(object), baseVersion: base, timestamp: now())
}

/// Collects the notifications a subscription receives, and lets a test wait for them.
final class NotificationLog: Sendable {
    private let received = Mutex<[RemoteNotification]>([])
    private let continuation: AsyncStream<[RemoteNotification]>.Continuation
    /// The received notifications, again after each one.
    let updates: AsyncStream<[RemoteNotification]>

    init() {
        (updates, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        continuation.yield([])
    }

    /// The subscription handler.
    var handler: @Sendable (RemoteNotification) -> Void {
        { [self] notification in
            received.withLock { received in
                received.append(notification)
                continuation.yield(received)
            }
        }
    }

    var all: [RemoteNotification] { received.withLock { $0 } }
}

/// Expects `body` to throw a ``MirrorError`` of `kind`, and returns it.
@discardableResult
func expectError<Result>(
    _ kind: MirrorError.Kind, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Result
) async -> MirrorError? {
    do {
        let result = try await body()
        Issue.record("expected MirrorError.\(kind), got \(result)", sourceLocation: sourceLocation)
        return nil
    } catch let error as MirrorError {
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected MirrorError.\(kind), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The result of `task`, failing with ``MirrorError/Kind/timedOut`` when it does not finish
/// within `timeout` (so a test that expects a task to end cannot hang).
func result<Success: Sendable>(
    of task: Task<Success, any Error>, within timeout: Duration = .seconds(60)
) async throws -> Result<Success, any Error> {
    let (finished, signal) = AsyncStream.makeStream(of: Result<Success, any Error>.self)
    let watcher = Task {
        do { signal.yield(.success(try await task.value)) } catch { signal.yield(.failure(error)) }
    }
    defer { watcher.cancel() }
    return try await finished.waitUntil(timeout: timeout, "the task to finish") { _ in true }
}

/// The value of `task`, failing with ``MirrorError/Kind/timedOut`` when it does not finish
/// within `timeout`.
func value<Success: Sendable>(
    of task: Task<Success, Never>, within timeout: Duration = .seconds(60)
) async throws -> Success {
    let (finished, signal) = AsyncStream.makeStream(of: Success.self)
    let watcher = Task { signal.yield(await task.value) }
    defer { watcher.cancel() }
    return try await finished.waitUntil(timeout: timeout, "the task to finish") { _ in true }
}

/// Retry settings that make the mirror tests quick: 5 ms, doubling up to 40 ms.
let quickRetries = MirrorConfiguration(retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(40))

/// A mirror of ``SampleRecord`` on `database`, retrying quickly.
func sampleMirror(
    on database: any RecordDatabase, configuration: MirrorConfiguration = quickRetries
) async throws -> Mirror<SampleRecord> {
    try await Mirror<SampleRecord>(database: database, configuration: configuration)
}

/// Collects the errors of a `.mirrorError` notification that name one of `recordIDs` (tests
/// run in parallel and share `NotificationCenter.default`; each test's records are its own).
func errorRecorder(naming recordIDs: String...) -> ErrorNotificationRecorder {
    let wanted = Set(recordIDs)
    return ErrorNotificationRecorder { !wanted.isDisjoint(with: $0.recordIDs) }
}
