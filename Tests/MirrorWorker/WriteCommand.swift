import Foundation
import MagicMirror

/// `mirror-worker write`: commits new records to one zone of a JSON-file database and
/// prints each record id on its own line as soon as the commit that stored it returned,
/// so a test (or a crash campaign) knows exactly which commits were acknowledged.
///
/// ```
/// mirror-worker write --db DIR [--zone Todo] [--user NAME] [--count N] [--batch B]
///                     [--prefix P] [--padding BYTES] [--relaxed] [--compaction-threshold BYTES]
///                     [--crash-at OPERATION:CALL[:BYTES]] [--retry]
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
/// - `--retry`: a commit that fails with a transient error is tried again (it was not
///   acknowledged); without it the worker stops with the error.
///
/// Prints `ready <writerID>` first. Output is written unbuffered.
enum WriteCommand {
    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, flags: ["relaxed", "retry"],
            usage: "mirror-worker write --db DIR [--zone T] [--user U] [--count N] [--batch B] [--prefix P] "
                + "[--padding BYTES] [--relaxed] [--compaction-threshold BYTES] [--crash-at OP:CALL[:BYTES]] [--retry]")
        let directory = try options.required("db")
        let recordType = options.string("zone") ?? "Todo"
        let zone = options.string("user").map { ZoneID.private(recordType, user: $0) } ?? .public(recordType)
        let count = try options.int("count", default: 100)
        let batch = max(1, try options.int("batch", default: 1))
        let prefix = options.string("prefix") ?? "p\(getpid())-"
        let padding = String(repeating: "x", count: try options.int("padding", default: 0))
        var databaseOptions = JSONFileDatabase.Options()
        if options.flag("relaxed") { databaseOptions.durability = .relaxed }
        databaseOptions.compactionThreshold = try options.int(
            "compaction-threshold", default: databaseOptions.compactionThreshold)
        let database = try options.openDatabase(directory, options: databaseOptions)
        try options.armCrash()
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
            let outcome: CommitOutcome
            do {
                outcome = try await database.commit(operations, to: zone)
            } catch let error as MirrorError where options.flag("retry") && error.kind.isTransient {
                // Not acknowledged: try the same commit again, as a mirror would.
                continue
            }
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
}
