import Foundation
import MirrorTestSupport
import MagicMirror
import Synchronization

/// `mirror-writer`: a `Mirror<CrashRecord>` on a JSON-file database that appends records
/// without end and prints each record id once `flush()` returned for it, for the crash
/// campaign (the test kills it with SIGKILL at random moments).
///
/// ```
/// mirror-writer --db DIR --prefix P [--user NAME] [--count N] [--seed S] [--max-batch B]
///               [--padding BYTES] [--compaction-threshold BYTES] [--compact-every BATCHES]
///               [--relaxed] [--crash-at OPERATION:CALL[:BYTES]]
/// ```
///
/// - `--user`: the user's private zone instead of the public one.
/// - Records are `<prefix><n>`; each flush commits 1…B of them (random, default 4), each with
///   a payload of 0…BYTES random characters (default 600) and a checksum.
/// - `--compact-every`: also compacts the zone, concurrently with the commits, after every
///   that many flushes (default 0: only automatic compaction).
/// - `--crash-at`: see `mirror-worker write`.
///
/// Prints `ready <writerID> <records loaded>` once the mirror is open (after checking that
/// it holds no id twice and that every record's checksum holds), then the ids, one per line.
enum MirrorWriterCommand {
    static let usage = "mirror-writer --db DIR --prefix P [--user NAME] [--count N] [--seed S] [--max-batch B] "
        + "[--padding BYTES] [--compaction-threshold BYTES] [--compact-every BATCHES] [--relaxed] "
        + "[--crash-at OPERATION:CALL[:BYTES]]"

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, flags: ["relaxed"], usage: usage)
        let directory = try options.required("db")
        let prefix = try options.required("prefix")
        let count = try options.int("count", default: Int.max)
        let maximumBatch = max(1, try options.int("max-batch", default: 4))
        let padding = max(0, try options.int("padding", default: 600))
        let compactEvery = try options.int("compact-every", default: 0)
        var random = SplitMix64(seed: UInt64(try options.int("seed", default: Int(getpid()))))

        var databaseOptions = JSONFileDatabase.Options()
        if options.flag("relaxed") { databaseOptions.durability = .relaxed }
        databaseOptions.compactionThreshold = try options.int("compaction-threshold", default: 1 << 20)
        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory), options: databaseOptions)
        try options.armCrash(on: database)
        let user = try options.string("user").map { name throws(MirrorError) in try MirrorUser(name: name) }
        let mirror = try await Mirror<CrashRecord>(
            database: database, scope: user == nil ? .public : .private, user: user,
            configuration: MirrorConfiguration(retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(100)))

        let loaded = mirror.dataModel.array
        let ids = loaded.map(\.id)
        guard Set(ids).count == ids.count else { throw MirrorError(.invalidRecord, "the mirror loaded an id twice") }
        if let broken = loaded.first(where: { CrashRecord.checksum(id: $0.id, payload: $0.payload) != $0.check }) {
            throw MirrorError(.invalidRecord, "record \(broken.id) does not match its checksum", recordIDs: [broken.id])
        }
        emitLine("ready \(database.writerID) \(loaded.count)")

        let compacting = CompactionFlag()
        var compaction: Task<Void, Never>?
        var next = 0
        var batches = 0
        while next < count {
            let size = min(Int.random(in: 1...maximumBatch, using: &random), count - next)
            var written: [String] = []
            for _ in 0..<size {
                let id = "\(prefix)\(next)"
                mirror.dataModel.append(CrashRecord(
                    id: id, writer: database.writerID, n: next,
                    payloadLength: Int.random(in: 0...padding, using: &random)))
                written.append(id)
                next += 1
            }
            try await mirror.flush()
            emitLine(written.joined(separator: "\n"))
            batches += 1
            if compactEvery > 0, batches % compactEvery == 0,
               compacting.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
                let zone = mirror.zone
                compaction = Task.detached {
                    defer { compacting.running.store(false, ordering: .releasing) }
                    do {
                        try await database.compact(zone)
                    } catch {
                        FileHandle.standardError.write(Data("mirror-writer: compaction failed: \(error)\n".utf8))
                        exit(3)
                    }
                }
            }
        }
        try await mirror.flush()
        await compaction?.value
    }
}

/// Whether a compaction started by `mirror-writer` is running.
private final class CompactionFlag: Sendable {
    let running = Atomic<Bool>(false)
}
