import Dispatch
import Foundation
import MagicMirror
import Synchronization

/// `mirror-worker mirror`: opens a `Mirror` of `Todo` records on a JSON-file database,
/// prints its records as one JSON line whenever they change, and applies commands read
/// from standard input, so that a test can drive several processes' mirrors.
///
/// ```
/// mirror-worker mirror --db DIR [--user NAME | --private] [--shared] [--compaction-threshold BYTES]
///                      [--polling] [--relaxed] [--remote DIR]
/// ```
///
/// - `--user NAME`: the private zone of `NAME`; `--private`: the private zone of
///   `UserSession.shared`'s current user, followed across `switch-user`. Default: public.
///   `--shared`: the shared zone of `NAME` (or of the current user) instead.
/// - `--compaction-threshold`, `--relaxed`: see `JSONFileDatabase.Options`; `--polling`
///   notices other processes by polling instead of file-system events.
/// - `--remote DIR`: `--db` is the replica of a `ReplicatedDatabase` whose remote is the
///   JSON-file database in `DIR`, a stand-in for a server that is unreachable while the file
///   `DIR.offline` exists (see `SwitchableRemote`).
///
/// Output, one line each, written whole:
/// - `ready <writerID> <identifier>` once the mirror is loaded;
/// - `state <uptime-ns> <json>` with the records as a JSON array of `{"id","title"}` objects
///   in `dataModel` order, first when loaded and then after changes (several changes close
///   together may give one line); `<uptime-ns>` is `DispatchTime.now().uptimeNanoseconds`;
/// - `ok <command line>` once a command was applied (for `flush`, once it returned, after a
///   line `flushed <uptime-ns>` saying when);
/// - `error <message>` for a command that failed.
///
/// Commands: `add <id> <title…>`, `edit <id> <title…>`, `delete <id>`, `flush`, `compact`,
/// `switch-user <name>`, `sync` (with `--remote`: `ReplicatedDatabase.synchronize()`),
/// `share <id> <user> <readOnly|readWrite>`, `revoke <id> <user>`, `shares` (prints
/// `share <id> <owner> <recipient> <access>` lines, then `ok`), `quit`. The worker exits at `quit` or at the end of its input.
enum MirrorCommand {
    /// The record the worker mirrors.
    struct Todo: Recordable {
        var id: String
        var title: String
    }

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, flags: ["private", "shared", "polling", "relaxed"],
            usage: "mirror-worker mirror --db DIR [--user NAME | --private] [--shared] [--compaction-threshold BYTES] "
                + "[--polling] [--relaxed] [--remote DIR]")
        let directory = try options.required("db")
        var databaseOptions = JSONFileDatabase.Options()
        if options.flag("relaxed") { databaseOptions.durability = .relaxed }
        if options.flag("polling") {
            databaseOptions.changeDetection = .polling
            databaseOptions.pollInterval = .milliseconds(20)
        }
        databaseOptions.compactionThreshold = try options.int(
            "compaction-threshold", default: databaseOptions.compactionThreshold)
        let files = try JSONFileDatabase(directory: URL(fileURLWithPath: directory), options: databaseOptions)
        let database: any RecordDatabase = try options.string("remote").map { remote in
            ReplicatedDatabase(
                local: files,
                remote: try SwitchableRemote(
                    directory: URL(fileURLWithPath: remote), offlineMarker: remote + ".offline"),
                retryDelay: .milliseconds(20), maximumRetryDelay: .milliseconds(200))
        } ?? files
        let isPrivate = options.flag("private") || options.string("user") != nil
        let mirror = try await Mirror<Todo>(
            database: database, scope: options.flag("shared") ? .shared : isPrivate ? .private : .public, user: try options.string("user").map { name throws(MirrorError) in try MirrorUser(name: name) })
        let output = LineWriter()
        output.write("ready \(database.writerID) \(database.identifier)")
        let observation = mirror.observe { records in
            output.write("state \(DispatchTime.now().uptimeNanoseconds) \(json(records))")
        }
        defer { observation.cancel() }

        for await line in standardInputLines() {
            let words = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard let command = words.first else { continue }
            do {
                switch command {
                case "add" where words.count == 3:
                    mirror.dataModel.append(Todo(id: words[1], title: words[2]))
                case "edit" where words.count == 3:
                    // Found and changed in one access: a remote change may move it meanwhile.
                    guard retitle(words[1], to: words[2], in: &mirror.dataModel) else {
                        throw usage("no record \(words[1])")
                    }
                case "delete" where words.count == 2:
                    mirror.dataModel.removeAll { $0.id == words[1] }
                case "flush":
                    try await mirror.flush()
                    output.write("flushed \(DispatchTime.now().uptimeNanoseconds)")
                case "compact":
                    try await files.compact(mirror.zone)
                case "sync":
                    guard let replicated = database as? ReplicatedDatabase else { throw usage("sync needs --remote") }
                    try await replicated.synchronize()
                case "share", "revoke", "shares":
                    try await ShareCommands.apply(words, to: mirror, output: output)
                case "switch-user" where words.count == 2:
                    UserSession.shared.switchUser(to: try MirrorUser(name: words[1]))
                case "quit":
                    return
                default:
                    throw usage("unknown command \(line)")
                }
                output.write("ok \(line)")
            } catch {
                output.write("error \(error)")
            }
        }
    }

    private static func retitle(_ id: String, to title: String, in records: inout RecordArray<Todo>) -> Bool {
        guard let position = records.firstIndex(ofRecordID: id) else { return false }
        records[position].title = title
        return true
    }

    /// The records as a JSON array, in order.
    private static func json(_ records: [Todo]) -> String {
        let objects = records.map { ["id": $0.id, "title": $0.title] }
        let data = (try? JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The lines of standard input, read on a thread of their own (a blocking read must not
    /// hold one of the few threads async tasks run on).
    private static func standardInputLines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let thread = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        thread.start()
        return stream
    }

    private static func usage(_ problem: String) -> MirrorError {
        MirrorError(
            .invalidRecord,
            "\(problem); usage: mirror-worker mirror --db DIR [--user NAME | --private] "
                + "[--compaction-threshold BYTES] [--polling] [--relaxed]")
    }
}

/// Writes whole lines to standard output, one at a time, unbuffered.
final class LineWriter: Sendable {
    private let lock = Mutex(())

    func write(_ line: String) {
        lock.withLock { _ in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }
}
