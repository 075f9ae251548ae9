import Foundation
import MagicMirror

/// `mirror-worker write`: commits new records to one zone of a JSON-file database and
/// prints each record id on its own line as soon as the commit that stored it returned,
/// so a test (or a crash campaign) knows exactly which commits were acknowledged.
///
/// ```
/// mirror-worker write --db DIR [--zone Todo] [--user NAME] [--count N] [--batch B]
///                     [--prefix P] [--padding BYTES] [--relaxed] [--compaction-threshold BYTES]
///                     [--crash-at OPERATION:CALL[:BYTES]]
/// ```
///
/// - `--zone`: the record type (default `Todo`); with `--user`, the user's private zone.
/// - `--count`: how many records (default 100); `--batch`: records per commit (default 1).
/// - `--prefix`: record ids are `<prefix><n>` (default: `p<pid>-`).
/// - `--padding`: adds a string field of that many bytes to every record.
/// - `--relaxed`: commits without fsync; `--compaction-threshold`: see
///   `JSONFileDatabase.Options.compactionThreshold`.
/// - `--crash-at OPERATION:CALL[:BYTES]`: the process kills itself with SIGKILL at that
///   call of the file-system seam from the moment the database is open (for `write`,
///   after writing BYTES of it), e.g. `write:6:1500`, `rename:1`, `unlink:1`.
///
/// Prints `ready <writerID>` first. Output is written unbuffered.
enum WriteCommand {
    static func run(_ arguments: [String]) async throws {
        var options: [String: String] = [:]
        var flags: Set<String> = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw usage("unexpected \(argument)") }
            let name = String(argument.dropFirst(2))
            if name == "relaxed" {
                flags.insert(name)
                index += 1
            } else {
                guard index + 1 < arguments.count else { throw usage("\(argument) needs a value") }
                options[name] = arguments[index + 1]
                index += 2
            }
        }
        guard let directory = options["db"] else { throw usage("--db is required") }
        let recordType = options["zone"] ?? "Todo"
        let zone = options["user"].map { ZoneID.private(recordType, user: $0) } ?? .public(recordType)
        let count = Int(options["count"] ?? "100") ?? 100
        let batch = max(1, Int(options["batch"] ?? "1") ?? 1)
        let prefix = options["prefix"] ?? "p\(getpid())-"
        let padding = String(repeating: "x", count: Int(options["padding"] ?? "0") ?? 0)
        var databaseOptions = JSONFileDatabase.Options()
        if flags.contains("relaxed") { databaseOptions.durability = .relaxed }
        if let threshold = options["compaction-threshold"].flatMap(Int.init) {
            databaseOptions.compactionThreshold = threshold
        }
        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory), options: databaseOptions)
        if let crash = options["crash-at"] {
            // OPERATION:CALL[:BYTES], e.g. write:6:1500 or rename:1
            let parts = crash.split(separator: ":").map(String.init)
            guard let operation = parts.first.flatMap(FileSystem.Operation.init(rawValue:)),
                  let call = parts.dropFirst().first.flatMap(Int.init)
            else { throw usage("bad --crash-at \(crash)") }
            let bytes = parts.count > 2 ? Int(parts[2]) ?? 0 : 0
            database.fileSystem.crash(at: operation, call: call, afterBytes: bytes)
        }
        emit("ready \(database.writerID)")
        var next = 0
        while next < count {
            let ids = (next..<min(next + batch, count)).map { "\(prefix)\($0)" }
            let operations = try ids.enumerated().map { offset, id in
                var object: [String: Any] = ["n": next + offset, "writer": database.writerID]
                if !padding.isEmpty { object["padding"] = padding }
                return RecordOperation.save(
                    id, fields: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
                    baseVersion: 0, timestamp: HybridLogicalClock.shared.now())
            }
            let outcome = try await database.commit(operations, to: zone)
            guard outcome.isApplied else {
                throw MirrorError(.conflict, "commit of \(ids.first ?? "") was not applied: \(outcome.results)")
            }
            emit(ids.joined(separator: "\n"))
            next += ids.count
        }
    }

    private static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    private static func usage(_ problem: String) -> MirrorError {
        MirrorError(
            .invalidRecord,
            "\(problem); usage: mirror-worker write --db DIR [--zone T] [--user U] [--count N] [--batch B] "
                + "[--prefix P] [--padding BYTES] [--relaxed] [--compaction-threshold BYTES] "
                + "[--crash-at OPERATION:CALL[:BYTES]]")
    }
}
