import Foundation
import MagicMirror
import MirrorTestSupport

/// Waiting for clients to converge, on their own notifications, and committing as an app
/// does while a relay or its server comes back.
enum Convergence {
    /// Waits until `database` holds every record of `ids` in `zone`, looking again at each of
    /// its notifications, for up to 120 seconds.
    static func wait(
        _ database: some RecordDatabase, in zone: ZoneID, holds ids: Set<String>, _ what: String
    ) async throws {
        try await withSubprocessTimeout(.seconds(120), "\(what): never held \(ids.sorted())") {
            let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            let subscription = try database.subscribe(to: zone) { _ in continuation.yield() }
            defer { subscription.cancel() }
            var wakes = stream.makeAsyncIterator()
            while try await !ids.isSubset(of: Set(database.fetchAll(in: zone).records.map(\.id))) {
                guard await wakes.next() != nil else { throw CancellationError() }
            }
        }
    }

    /// Commits `operations`, committing them again (the same operations: a retry) after
    /// each transient failure, for up to 120 seconds; the outcome and how many attempts
    /// failed.
    @discardableResult
    static func commitRetrying(
        _ operations: [RecordOperation], to zone: ZoneID, on database: some RecordDatabase
    ) async throws -> (outcome: CommitOutcome, failures: Int) {
        let deadline = ContinuousClock.now + .seconds(120)
        var failures = 0
        while true {
            do {
                return (try await database.commit(operations, to: zone), failures)
            } catch let error as MirrorError where error.kind.isTransient && ContinuousClock.now < deadline {
                failures += 1
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}
