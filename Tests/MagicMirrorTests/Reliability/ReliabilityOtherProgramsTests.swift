import Foundation
import MagicMirror
import MirrorTestSupport
import Dispatch
import Testing

/// Files of a zone changed by other programs while real writer processes run: a journal
/// replaced by an editor (`sed -i` writes a new file and renames it over the old one), the
/// `lock` file removed, a journal cut short. Every acknowledged commit must be stored, or
/// its loss reported.
@Suite(.timeLimit(.minutes(10))) struct ReliabilityOtherProgramsTests {
    let zone = ZoneID.public("Todo")

    /// Replaces `url` the way `sed -i` does: the same bytes in a new file (a new inode),
    /// renamed over the old name.
    private func replaceLikeAnEditor(_ url: URL) throws {
        let bytes = try Data(contentsOf: url)
        let temporary = url.deletingLastPathComponent().appendingPathComponent("sed\(UUID().uuidString.prefix(6))")
        try bytes.write(to: temporary)
        guard rename(temporary.path, url.path) == 0 else {
            throw SubprocessError("rename failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Runs two `mirror-worker write --retry` processes, calling `interfere` after every
    /// `every`-th id the first one acknowledges; returns every acknowledged id.
    ///
    /// An interference that is due waits until each writer still running has acknowledged a
    /// commit since the previous one, so that every writer has seen each replaced file before
    /// the next replacement (see the limit in the format article: two replacements in a row
    /// while one writer has not written in between).
    private func runWriters(
        in directory: TemporaryDirectory, count: Int, extra: [String] = [], every: Int,
        interfere: @escaping @Sendable () throws -> Void
    ) async throws -> [String] {
        let workers = try ["A", "B"].map { prefix in
            try WorkerProcess(
                ["write", "--db", directory.path, "--count", "\(count)", "--prefix", prefix, "--retry"] + extra)
        }
        struct Pacing: Sendable {
            var due = 0
            var wroteSince = [true, true]
            var finished = [false, false]
            /// Whether an interference may run now; marks it done when so.
            mutating func take() -> Bool {
                guard due > 0, zip(wroteSince, finished).allSatisfy({ $0 || $1 }) else { return false }
                due -= 1
                wroteSince = [false, false]
                return true
            }
        }
        let pacing = MutexBox(Pacing())
        let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    var ids: [String] = []
                    for await line in worker.lines where !line.hasPrefix("ready ") {
                        ids.append(line)
                        var run = false
                        pacing.update { pacing in
                            pacing.wroteSince[index] = true
                            if index == 0, ids.count % every == 0 { pacing.due += 1 }
                            run = pacing.take()
                        }
                        if run { try interfere() }
                    }
                    pacing.update { $0.finished[index] = true }
                    // Replacements still due (the other writer may have finished first).
                    while true {
                        var run = false
                        pacing.update { run = $0.take() }
                        guard run else { break }
                        try interfere()
                    }
                    return ids
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        for worker in workers { #expect(try await worker.waitForExit() == 0) }
        return acknowledged
    }

    @Test func aJournalReplacedUnderRunningWritersLosesNoCommit() async throws {
        let directory = try TemporaryDirectory("journal-replaced")
        defer { directory.remove() }
        let setup = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await setup.commit([jsonSave("seed", ["n": 0])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: setup.directory(of: zone))
        let replacements = MutexBox(0)
        let count = 300
        let acknowledged = try await runWriters(in: directory, count: count, every: 15) {
            try replaceLikeAnEditor(journal)
            replacements.update { $0 += 1 }
        }
        #expect(acknowledged.count == 2 * count)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = Set(try await reader.fetchAll(in: zone).records.map(\.id))
        let missing = Set(acknowledged).subtracting(stored)
        // The known window (format article, "Files changed by other programs"): a commit made
        // on a journal that was replaced again before every writer had written to it can
        // only be kept in quarantine, reported. Nothing may be missing without a trace.
        let zoneDirectory = setup.directory(of: zone)
        var quarantined = ""
        for name in try FileManager.default.contentsOfDirectory(atPath: zoneDirectory.path)
        where name.hasPrefix("quarantine-") {
            quarantined += (try? String(contentsOf: zoneDirectory.appendingPathComponent(name), encoding: .utf8)) ?? ""
        }
        let lost = missing.filter { !quarantined.contains("\"id\":\"\($0)\"") }
        Reliability.report("journal-replaced", [
            "acknowledged": acknowledged.count, "stored": stored.count - 1,
            "replacements": replacements.value, "quarantined": missing.count - lost.count, "lost": lost.count,
        ])
        #expect(replacements.value == count / 15)
        #expect(lost.isEmpty, "acknowledged but neither stored nor quarantined: \(lost.sorted().prefix(10))")
    }

    /// A writer that holds `lock` open keeps locking the removed file; a writer started
    /// after the removal creates and locks a new one. Each new writer starts right after
    /// another removal, while a long-running writer commits and both compact.
    @Test func removingTheLockFileUnderRunningWritersLosesNoCommit() async throws {
        let directory = try TemporaryDirectory("lock-removed")
        defer { directory.remove() }
        let setup = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await setup.commit([jsonSave("seed", ["n": 0])], to: zone)
        let zoneDirectory = setup.directory(of: zone)
        let lock = zoneDirectory.appendingPathComponent("lock")
        // A small threshold makes the writers compact under each other as well.
        let common = ["--db", directory.path, "--retry", "--compaction-threshold", "8192"]
        let longRunning = try WorkerProcess(["write", "--count", "1500", "--prefix", "L"] + common)
        let longIDs = Task {
            var ids: [String] = []
            for await line in longRunning.lines where !line.hasPrefix("ready ") { ids.append(line) }
            return ids
        }
        var acknowledged: [String] = []
        var removals = 0
        for round in 0..<8 {
            if unlink(lock.path) == 0 { removals += 1 }
            let worker = try WorkerProcess(["write", "--count", "60", "--prefix", "S\(round)-"] + common)
            for await line in worker.lines where !line.hasPrefix("ready ") { acknowledged.append(line) }
            #expect(try await worker.waitForExit() == 0)
        }
        acknowledged += await longIDs.value
        #expect(try await longRunning.waitForExit() == 0)
        #expect(acknowledged.count == 8 * 60 + 1500)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = Set(try await reader.fetchAll(in: zone).records.map(\.id))
        let lost = Set(acknowledged).subtracting(stored)
        let leftovers = JSONFileTestSupport.names(in: zoneDirectory).filter { $0.hasPrefix("snapshot.json.tmp") }
        Reliability.report("lock-removed", [
            "acknowledged": acknowledged.count, "stored": stored.count - 1, "removals": removals,
            "lost": lost.count, "problems": reader.problems.count,
        ])
        #expect(removals == 8)
        #expect(lost.isEmpty, "acknowledged but not stored: \(lost.sorted().prefix(10))")
        #expect(reader.problems.isEmpty, "\(reader.problems)")
        #expect(leftovers.isEmpty, "temporary snapshots left behind: \(leftovers)")
    }

    @Test func aJournalCutShortByAnotherProgramIsReported() async throws {
        let directory = try TemporaryDirectory("journal-cut")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 { try await writer.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        let journal = try JSONFileTestSupport.journal(in: writer.directory(of: zone))
        let handle = try FileHandle(forWritingTo: journal)
        try handle.truncate(atOffset: 10)
        try handle.close()

        try await writer.commit([jsonSave("after", ["n": 9])], to: zone)
        let problem = try #require(writer.problems.first { $0.message.contains("was cut to 10 bytes") })
        #expect(problem.kind == .corruptEntry)
        #expect(problem.file == journal.path)
        #expect(try await writer.fetch(["after"], in: zone).count == 1)
    }

    @Test func aJournalRemovedByAnotherProgramIsWrittenBackWhole() async throws {
        let directory = try TemporaryDirectory("journal-removed")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 { try await writer.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        let journal = try JSONFileTestSupport.journal(in: writer.directory(of: zone))
        try FileManager.default.removeItem(at: journal)

        try await writer.commit([jsonSave("after", ["n": 9])], to: zone)
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let ids = Set(try await reader.fetchAll(in: zone).records.map(\.id))
        #expect(ids == ["r0", "r1", "r2", "r3", "r4", "after"])
        #expect(writer.problems.contains { $0.message.contains("were appended to it again") })
    }

    /// A zone directory moved away while a database is open: the next commit goes to the
    /// directory at the zone's path, where every other process looks, and the move is
    /// reported; before, it went on writing into the moved directory, unseen by others.
    @Test func aMovedZoneDirectoryIsReportedAndCommitsGoWhereOthersLook() async throws {
        let directory = try TemporaryDirectory("directory-moved")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("before", ["v": 1])], to: zone)
        let zoneDirectory = db.directory(of: zone)
        try FileManager.default.moveItem(
            at: zoneDirectory, to: directory.url.appendingPathComponent("moved-away"))
        try await db.commit([jsonSave("after", ["v": 2])], to: zone)
        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = try await other.fetchAll(in: zone).records.map(\.id)
        #expect(stored == ["after"])
        #expect(db.problems.contains { $0.kind == .ioFailure && $0.message.contains("moved, removed or replaced") })
    }

    /// Opening and dropping databases keeps nothing per database (#11.5): the live heap and
    /// open descriptors stay flat over many cycles, each on a new directory and through a
    /// mirror, in a child process so that nothing else in the test process counts.
    @Test(arguments: [["--mirror", "--distinct"], []])
    func openingAndDroppingDatabasesKeepsNothing(mode: [String]) async throws {
        let directory = try TemporaryDirectory("open-close")
        defer { directory.remove() }
        let cycles = 2_500
        let run = try await MirrorWorkerRun.run(
            ["open-close", "--db", directory.path, "--count", "\(cycles)", "--warm-up", "500"] + mode,
            timeout: .seconds(600))
        let numbers = run.standardOutput.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(numbers.count == 8, "output: \(run.standardOutput) \(run.standardError)")
        let (residentBefore, descriptorsBefore, residentMiddle, residentAfter, descriptorsAfter) =
            (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        let (heapBefore, heapMiddle, heapAfter) = (numbers[5], numbers[6], numbers[7])
        print("RELIABILITY open-close\(mode.joined()): cycles=2x\(cycles) heap-bytes=\(heapBefore)->\(heapMiddle)->\(heapAfter) rss-kib=\(residentBefore)->\(residentMiddle)->\(residentAfter) fds=\(descriptorsBefore)->\(descriptorsAfter)")
        #expect(descriptorsAfter <= descriptorsBefore, "descriptors grew")
        // A leak grows both halves alike. The live heap is judged, not resident memory,
        // which also moves with the pages malloc keeps for its threads (more of them on a
        // loaded machine: resident memory grew 625-730 KiB in a half with no leak). What the
        // process sets up once lands in the first half; the second half's heap moved by
        // -1 to +8 KB in quiet runs. The leak found before, 0.5-0.75 KiB per database, adds
        // 1,250 KiB or more; the zone watcher's sleeping sweep (#37) added 700-1,300 KB.
        #expect(heapAfter - heapMiddle < cycles * 100, "the second half's heap grew \(heapAfter - heapMiddle) bytes")
    }
}

/// A read must not return the state from before another writer's commit because another
/// thread of this process is catching up with the files at that moment.
@Suite(.timeLimit(.minutes(10))) struct JSONFileReadDuringCatchUpTests {
    let zone = ZoneID.public("Todo")

    @Test func aReadWaitsForTheCatchUpInProgress() async throws {
        let directory = try TemporaryDirectory("read-during-catch-up")
        defer { directory.remove() }
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("before", ["n": 0])], to: zone)
        #expect(try await reader.fetchAll(in: zone).records.count == 1)

        try await writer.commit([jsonSave("during", ["n": 1])], to: zone)

        // Another thread holds the zone (as a watcher's catch-up does) when the read
        // starts; the read must wait for it and see the commit, not return the state from
        // before. Plain threads, so the cooperative pool stays free for the read.
        let held = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? reader.whileZoneIsBusy(zone) {
                held.signal()
                // Long enough for the read to reach the busy zone: it must wait, not return.
                Thread.sleep(forTimeInterval: 0.3)
            }
            released.signal()
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { held.wait(); continuation.resume() }
        }
        let read = try await reader.fetchAll(in: zone).records.map(\.id)
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { released.wait(); continuation.resume() }
        }
        #expect(Set(read) == ["before", "during"])
    }
}
