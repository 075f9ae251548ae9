import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// Crash: `mirror-writer` processes (a `Mirror` appending without end, printing each id once
/// `flush()` returned for it) are killed with SIGKILL at random moments, one after another
/// on one database, including in the middle of compactions. After every kill the database
/// opens, every acknowledged id is there exactly once, every record decodes whole, and the
/// next writer loads exactly what was stored and goes on.
///
/// 24 kills per run; 200 with `MAGICMIRROR_RELIABILITY_LONG=1`. The random choices come
/// from a seed that the test prints; `MAGICMIRROR_RELIABILITY_SEED=<seed>` repeats them.
@Suite(.timeLimit(.minutes(10))) struct ReliabilityCrashTests {
    let zone = ZoneID.public("CrashRecord")

    /// Points at which every fourth writer kills itself (`--crash-at`): the `chmod` of the
    /// next journal (compaction step 1), the `rename` of the new snapshot (before step 3),
    /// the first `unlink` of an old journal (before step 4), and 90 bytes into the third
    /// write (in an append or a snapshot).
    static let crashPoints = ["chmod:1", "rename:1", "unlink:1", "write:3:90"]

    /// What the campaign counts, for RELIABILITY.md.
    struct Figures {
        var runs = 0
        var kills = 0
        var selfKills = 0
        var killsInCompaction = 0
        var killsMidAppend = 0
        var acknowledged = 0
        var recordsChecked = 0
        var lost = 0
    }

    @Test func writersKilledAtRandomMomentsLoseNoAcknowledgedRecord() async throws {
        let kills = Reliability.isLongRun ? 200 : 24
        let seed = Reliability.seed
        print("RELIABILITY crash: seed=\(seed) (MAGICMIRROR_RELIABILITY_SEED=\(seed) repeats this run)")
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory("crash")
        defer { directory.remove() }
        let zoneDirectory = try JSONFileDatabase(isolatedDirectory: directory.url).directory(of: zone)

        var acknowledged = Set<String>()
        var stored = 0
        var figures = Figures()
        var leftovers = Set<String>()
        var tornFiles = 0
        for round in 0..<kills {
            let selfKill = round % 4 == 3 ? Self.crashPoints[(round / 4) % Self.crashPoints.count] : nil
            var arguments = [
                "mirror-writer", "--db", directory.path, "--prefix", "k\(round)-",
                "--seed", "\(random.next() >> 2)", "--max-batch", "4", "--padding", "600",
                "--compaction-threshold", "16384", "--compact-every", "4",
            ]
            if let selfKill { arguments += ["--crash-at", selfKill] }
            // An outside kill comes after 0…20 acknowledged flushes and 0…30 ms more.
            let killAfter = Int.random(in: 0...20, using: &random)
            let delay = Duration.microseconds(Int.random(in: 0..<30_000, using: &random))
            let context = "round \(round) of seed \(seed)\(selfKill.map { ", --crash-at \($0)" } ?? "")"

            let worker = try WorkerProcess(arguments)
            figures.runs += 1
            // A writer that never reaches its kill would hang the test: stop it, and fail.
            let stuck = MutexBox(false)
            let watchdog = Task {
                try? await Task.sleep(for: .seconds(60))
                if !Task.isCancelled {
                    stuck.update { $0 = true }
                    worker.kill()
                }
            }
            var killer: Task<Void, Never>?
            var loaded: Int?
            var flushes = 0
            for await line in worker.lines {
                if line.hasPrefix("ready ") {
                    loaded = line.split(separator: " ").last.flatMap { Int($0) }
                } else {
                    acknowledged.insert(line)
                    figures.acknowledged += 1
                    flushes += 1
                }
                if selfKill == nil, killer == nil, loaded != nil, flushes >= killAfter {
                    killer = Task {
                        try? await Task.sleep(for: delay)
                        worker.kill()
                    }
                }
            }
            _ = try await worker.waitForExit()
            watchdog.cancel()
            try #require(!stuck.value, "the writer was still running after 60 s (\(context))")
            try #require(worker.wasKilled, "the writer was killed (\(context))")
            #expect(worker.process.termination == .signaled(SIGKILL), "\(context)")
            figures.kills += 1
            if selfKill != nil { figures.selfKills += 1 }
            if let loaded {
                #expect(loaded == stored, "the new writer loaded every stored record (\(context))")
            }

            // Evidence on disk of a compaction the kill interrupted.
            let before = compactionLeftovers(in: zoneDirectory)
            let interruptedCompaction = !before.subtracting(leftovers).isEmpty
                || selfKill.map { !$0.hasPrefix("write") } == true

            let check = try await verify(directory, acknowledged: acknowledged, context: context)
            stored = check.stored
            figures.recordsChecked += acknowledged.count
            figures.lost += check.lost
            if interruptedCompaction { figures.killsInCompaction += 1 }
            let torn = Reliability.quarantined(in: zoneDirectory, suffix: ".torn").count
            if torn > tornFiles { figures.killsMidAppend += 1 }
            tornFiles = torn
            leftovers = compactionLeftovers(in: zoneDirectory)
        }

        // A last writer runs to its end on what the kills left.
        let last = try WorkerProcess(["mirror-writer", "--db", directory.path, "--prefix", "last-", "--count", "8"])
        figures.runs += 1
        var lastIDs: [String] = []
        for await line in last.lines where !line.hasPrefix("ready ") { lastIDs.append(line) }
        #expect(try await last.waitForExit() == 0)
        #expect(lastIDs == (0..<8).map { "last-\($0)" })
        acknowledged.formUnion(lastIDs)
        figures.acknowledged += lastIDs.count
        let check = try await verify(directory, acknowledged: acknowledged, context: "after the last writer")
        figures.recordsChecked += acknowledged.count
        figures.lost += check.lost

        #expect(figures.kills >= 20)
        #expect(figures.killsInCompaction >= 1, "some kills interrupted a compaction")
        #expect(figures.lost == 0)
        Reliability.report("crash", [
            "seed": seed, "runs": figures.runs, "kills": figures.kills, "self-kills": figures.selfKills,
            "kills-in-compaction": figures.killsInCompaction, "kills-mid-append": figures.killsMidAppend,
            "acknowledged": figures.acknowledged, "stored": check.stored,
            "records-checked": figures.recordsChecked, "records-lost": figures.lost,
        ])
    }

    /// Files that only an unfinished compaction leaves: `snapshot.json.tmp`, and journals of
    /// another generation than the snapshot's (the next one, made before the rename; older
    /// ones, not removed yet), each named with its inode and size so that a new one shows.
    private func compactionLeftovers(in zoneDirectory: URL) -> Set<String> {
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        let generation = (try? JSONFileTestSupport.jsonObject(snapshot))?["generation"] as? Int ?? 0
        var found = Set<String>()
        for name in JSONFileTestSupport.names(in: zoneDirectory)
        where name.hasPrefix("snapshot.json.tmp") || (name.hasPrefix("journal-") && name != "journal-\(generation).ndjson") {
            let attributes = try? FileManager.default.attributesOfItem(atPath: zoneDirectory.appendingPathComponent(name).path)
            let inode = attributes?[.systemFileNumber] as? Int ?? 0
            let size = attributes?[.size] as? Int ?? 0
            found.insert("\(name)#\(inode)#\(size)")
        }
        return found
    }

    /// Opens the database as a new process would (its own engine) and a mirror on it, and
    /// checks every acknowledged id is there exactly once, whole, in the array and in the
    /// files.
    ///
    /// - Returns: How many records are stored and how many acknowledged ones are missing.
    private func verify(
        _ directory: TemporaryDirectory, acknowledged: Set<String>, context: String
    ) async throws -> (stored: Int, lost: Int) {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let mirror = try await Mirror<CrashRecord>(database: database)
        let records = mirror.dataModel.array
        let ids = records.map(\.id)
        #expect(mirror.lastError == nil, "every stored record decodes (\(context)): \(String(describing: mirror.lastError))")
        try #require(Set(ids).count == ids.count, "no id twice in the array (\(context))")
        let missing = acknowledged.subtracting(ids)
        #expect(missing.isEmpty, "acknowledged but lost (\(context)): \(missing.sorted().prefix(5))")
        let broken = records.filter { !$0.isWhole }.map(\.id)
        #expect(broken.isEmpty, "records that are not whole (\(context)): \(broken.prefix(5))")

        let all = try await database.fetchAll(in: zone)
        #expect(all.records.count == records.count, "every stored record is in the array (\(context))")
        #expect(all.records.allSatisfy { $0.version == 1 }, "each record was stored once (\(context))")
        #expect(database.problems.allSatisfy { $0.kind == .corruptEntry }, "\(context): \(database.problems)")

        // The files, as jq reads them: every line parses, each record appears once.
        let (snapshot, journal) = try Reliability.storedLines(in: database.directory(of: zone))
        var occurrences: [String: Int] = [:]
        for line in snapshot + journal {
            if let id = line["id"] as? String { occurrences[id, default: 0] += 1 }
        }
        let repeated = occurrences.filter { $0.value != 1 }.keys.sorted()
        #expect(repeated.isEmpty, "records stored twice (\(context)): \(repeated.prefix(5))")
        #expect(Set(occurrences.keys) == Set(ids), "the files hold what the mirror loaded (\(context))")
        return (records.count, missing.count)
    }
}
