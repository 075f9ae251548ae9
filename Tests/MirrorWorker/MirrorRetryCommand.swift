import Foundation
import MagicMirror
import MirrorTestSupport
import Synchronization

/// `mirror-retry`: appends one record through a `Mirror<EditRecord>` to a database it may
/// not be allowed to write yet, for the read-only-directory run (started as an unprivileged
/// user, since permissions do not restrict root).
///
/// ```
/// mirror-retry --db DIR --id ID
/// ```
///
/// 1. Opens the mirror and prints `loaded <records>`.
/// 2. Appends record ID, which starts a commit. When a failure is posted, prints
///    `refused <kind> attempts=<failed attempts> pending=<pending changes> notifications=1`;
///    when the change is committed instead, prints `committed` and stops.
/// 3. Waits for `go` on standard input (sent once the directory is writable), flushes
///    (which retries at once) and prints `committed pending=<pending> notifications=<n>`
///    (n: every `.mirrorError` notification posted in this process).
///
/// Automatic retries wait an hour, so every attempt is one the command asked for.
enum MirrorRetryCommand {
    static let usage = "mirror-retry --db DIR --id ID"

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, usage: usage)
        let directory = try options.required("db")
        let id = try options.required("id")
        let counter = NotificationCounter()
        let (posted, postedContinuation) = AsyncStream.makeStream(of: MirrorError.self)
        let observer = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) {
            guard let error = $0.object as? MirrorError else { return }
            counter.count.add(1, ordering: .relaxed)
            postedContinuation.yield(error)
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory))
        let mirror = try await Mirror<EditRecord>(
            database: database, configuration: MirrorConfiguration(retryDelay: .seconds(3600)))
        emitLine("loaded \(mirror.dataModel.count)")

        // The append starts a commit; its failure is posted (or, after 30 s, is not).
        mirror.dataModel.append(EditRecord(id: id, owner: "retry"))
        let failure = await withTaskGroup(of: MirrorError?.self) { group in
            group.addTask {
                for await error in posted { return error }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        guard let failure else {
            emitLine(mirror.hasPendingChanges ? "no failure posted" : "committed")
            return
        }
        let attempts = mirror.pendingChanges.map(\.failedAttempts).reduce(0, +)
        emitLine("refused \(failure.kind) attempts=\(attempts) pending=\(mirror.pendingChanges.count) "
            + "notifications=\(counter.count.load(ordering: .relaxed))")
        try await waitForInput("go")
        try await mirror.flush()
        emitLine("committed pending=\(mirror.pendingChanges.count) notifications=\(counter.count.load(ordering: .relaxed))")
    }
}

/// Counts `.mirrorError` notifications.
private final class NotificationCounter: Sendable {
    let count = Atomic<Int>(0)
}
