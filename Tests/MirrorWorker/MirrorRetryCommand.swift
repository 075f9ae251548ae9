import Foundation
import MagicMirror

/// `mirror-retry`: appends one record through a `Mirror<EditRecord>` to a database it may
/// not be allowed to write yet, for the read-only-directory run (started as an unprivileged
/// user, since permissions do not restrict root).
///
/// ```
/// mirror-retry --db DIR --id ID
/// ```
///
/// 1. Opens the mirror and prints `loaded <records>`.
/// 2. Appends record ID and flushes. When the flush fails, prints
///    `refused <kind> attempts=<failed attempts> pending=<pending changes> notifications=<n>`
///    (n: `.mirrorError` notifications posted in this process so far); when it succeeds,
///    prints `committed` and stops.
/// 3. Waits for `go` on standard input (sent once the directory is writable), flushes again
///    (which retries at once) and prints `committed pending=<pending> notifications=<n>`.
///
/// Automatic retries wait an hour, so every attempt is one the command asked for.
enum MirrorRetryCommand {
    static let usage = "mirror-retry --db DIR --id ID"

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, usage: usage)
        let directory = try options.required("db")
        let id = try options.required("id")
        let (errors, errorContinuation) = AsyncStream.makeStream(of: MirrorError.self)
        let observer = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) {
            if let error = $0.object as? MirrorError { errorContinuation.yield(error) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        var posted = errors.makeAsyncIterator()

        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory))
        let mirror = try await Mirror<EditRecord>(
            database: database, configuration: MirrorConfiguration(retryDelay: .seconds(3600)))
        emitLine("loaded \(mirror.dataModel.count)")

        mirror.dataModel.append(EditRecord(id: id, owner: "retry"))
        do {
            try await mirror.flush()
            emitLine("committed")
            return
        } catch let error as MirrorError {
            // The notification is posted just after flush() learns of the failure.
            var notifications = 0
            if await posted.next() != nil { notifications += 1 }
            let attempts = mirror.pendingChanges.map(\.failedAttempts).reduce(0, +)
            emitLine("refused \(error.kind) attempts=\(attempts) pending=\(mirror.pendingChanges.count) "
                + "notifications=\(notifications)")
            try await waitForInput("go")
            try await mirror.flush()
            errorContinuation.finish()
            while await posted.next() != nil { notifications += 1 }
            emitLine("committed pending=\(mirror.pendingChanges.count) notifications=\(notifications)")
        }
    }
}
