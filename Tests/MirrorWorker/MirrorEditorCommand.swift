import Foundation
import MirrorTestSupport
import MagicMirror
import Synchronization

/// `mirror-editor`: one of several processes that commit to one zone through their own
/// `Mirror<EditRecord>`, for the concurrency runs.
///
/// ```
/// mirror-editor --db DIR --name NAME --index I --output FILE [--append N] [--shared K]
///               [--rounds R] [--policy changedKeys|lastWriterWins] [--timeout SECONDS]
/// ```
///
/// 1. Opens the mirror, prints `ready <records loaded>` and waits for `go` on standard input.
/// 2. Appends N records `<name>-<n>`, flushing after each one: N commits.
/// 3. R rounds: sets its own field (`p<I>`) of each record `shared-0`…`shared-<K-1>` (which
///    must exist) to the round number and the shared field `last` to its name, then flushes.
///    The records are edited by every process at once; the conflict policy settles them.
///    Prints `editing` once the first round's edits are made (not yet committed).
/// 4. Prints `done merges=<n>` (n: conflicts it settled by merging, which the array showed
///    as remote changes while pending) and waits for `report` on standard input (sent once every process is
///    done, so the zone no longer changes).
/// 5. Reads the zone from the database and waits until the mirror's array, sorted by id,
///    equals it; writes that array (JSON, sorted keys) to FILE and prints
///    `final <count> <digest>`.
enum MirrorEditorCommand {
    static let usage = "mirror-editor --db DIR --name NAME --index I --output FILE [--append N] [--shared K] "
        + "[--rounds R] [--policy changedKeys|lastWriterWins] [--timeout SECONDS]"

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, usage: usage)
        let directory = try options.required("db")
        let name = try options.required("name")
        let index = try options.int("index", default: 0)
        guard (0..<4).contains(index) else { throw WorkerUsageError("--index must be 0…3; \(usage)") }
        let output = try options.required("output")
        let appends = try options.int("append", default: 0)
        let shared = try options.int("shared", default: 0)
        let rounds = try options.int("rounds", default: 0)
        let timeout = Duration.seconds(try options.int("timeout", default: 120))
        let policy: ConflictPolicy<EditRecord>
        switch options.string("policy") ?? "changedKeys" {
        case "changedKeys": policy = .changedKeys
        case "lastWriterWins": policy = .lastWriterWins
        case let other: throw WorkerUsageError("unknown policy \(other); \(usage)")
        }

        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory))
        let mirror = try await Mirror<EditRecord>(
            database: database, conflictPolicy: policy,
            configuration: MirrorConfiguration(retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(100)))
        // Conflicts this process settled by merging: the array then shows the merged record
        // (a remote change) while it is committed.
        let merges = MergeCounter()
        let changes = mirror.changes()
        let counting = Task {
            for await change in changes where change.origin == .remote && change.state == .pending {
                merges.count.add(1, ordering: .relaxed)
            }
        }
        emitLine("ready \(mirror.dataModel.count)")
        try await waitForInput("go")

        for number in 0..<appends {
            mirror.dataModel.append(EditRecord(id: "\(name)-\(number)", owner: name))
            try await mirror.flush()
        }
        let field = EditRecord.field(index)
        for round in 0..<rounds {
            for number in 0..<shared {
                let id = "shared-\(number)"
                guard let position = mirror.dataModel.firstIndex(ofRecordID: id) else {
                    throw MirrorError(.notFound, "record \(id) is not in the mirror", recordIDs: [id])
                }
                mirror.dataModel[position][keyPath: field] = round + 1
                mirror.dataModel[position].last = name
            }
            if round == 0 { emitLine("editing") }
            try await mirror.flush()
        }
        counting.cancel()
        emitLine("done merges=\(merges.count.load(ordering: .relaxed))")
        try await waitForInput("report")

        // Nothing changes any more: the mirror must come to hold exactly what is stored. The
        // files are read by an engine of its own, which loads them whole: the shared one may
        // be in the middle of reading the last commits (a read does not wait for that).
        let decoder = JSONDecoder()
        let reference = try JSONFileDatabase(isolatedDirectory: URL(fileURLWithPath: directory))
        let stored = try await reference.fetchAll(in: mirror.zone).records
            .map { try decoder.decode(EditRecord.self, from: $0.fields ?? Data()) }
            .sorted { $0.id < $1.id }
        do {
            try await waitForRecords(mirror, timeout: timeout, "the mirror to hold the \(stored.count) stored records") {
                $0.count == stored.count && $0.sorted { $0.id < $1.id } == stored
            }
        } catch {
            let held = mirror.dataModel.array.sorted { $0.id < $1.id }
            let differing = zip(held, stored).filter { $0 != $1 }.prefix(3)
            throw MirrorError(
                .timedOut, "\(error); the mirror holds \(held.count) records, the files \(stored.count); "
                    + "pending \(mirror.pendingChanges.count); first differences: \(Array(differing))")
        }
        let final = mirror.dataModel.array.sorted { $0.id < $1.id }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = try encoder.encode(final)
        try bytes.write(to: URL(fileURLWithPath: output))
        emitLine("final \(final.count) \(String(FNV1a.hash(bytes), radix: 16))")
    }
}

/// Counts the conflicts `mirror-editor` settled by merging.
private final class MergeCounter: Sendable {
    let count = Atomic<Int>(0)
}
