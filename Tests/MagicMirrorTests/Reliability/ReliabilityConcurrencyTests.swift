#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// Concurrency: four `mirror-editor` processes, each with its own mirror, commit to one zone
/// at once. Nothing is lost or stored twice, and every process ends with the same records —
/// also when they edit the same records, which the conflict policy settles the same way in
/// every process.
///
/// Each process waits for the others through its standard input (`go`, then `report` once
/// every process is done), then waits — on its mirror's changes, however long the news takes
/// to arrive — until its array holds what the database holds, and writes it to a file.
@Suite(.timeLimit(.minutes(10))) struct ReliabilityConcurrencyTests {
    let zone = ZoneID.public("EditRecord")
    static let names = ["A", "B", "C", "D"]

    /// What one process ended with: its `final <count> <digest>` line and its array (JSON).
    struct Final {
        var line: String
        var bytes: Data
    }

    /// Runs one `mirror-editor` per name with `arguments(index)`, lets them start together,
    /// and returns what each ended with.
    ///
    /// - Parameter holdingLock: A zone whose writers' lock the test holds from before `go`
    ///   until every process made its first edits, so that those edits are all based on the
    ///   same versions and truly conflict.
    private func runEditors(
        _ directory: TemporaryDirectory, holdingLock lockedZone: URL? = nil, arguments: (Int) -> [String]
    ) async throws -> (finals: [Final], merges: Int) {
        let events = EventRecorder<String>()
        let finals = MutexBox<[Int: String]>([:])
        let merges = MutexBox(0)
        var workers: [WorkerProcess] = []
        var readers: [Task<Void, Never>] = []
        for (index, name) in Self.names.enumerated() {
            let output = directory.url.appendingPathComponent("final-\(name).json").path
            let worker = try WorkerProcess(
                ["mirror-editor", "--db", directory.path, "--name", name, "--index", "\(index)", "--output", output]
                    + arguments(index),
                input: true)
            workers.append(worker)
            readers.append(Task {
                for await line in worker.lines {
                    let word = String(line.prefix { $0 != " " })
                    if word == "final" { finals.update { $0[index] = line } }
                    if word == "done", let count = line.split(separator: "=").last.flatMap({ Int($0) }) {
                        merges.update { $0 += count }
                    }
                    events.record(word)
                }
            })
        }
        defer { for worker in workers { worker.kill() } }  // no-op for a worker that already ended

        try #require(await events.wait(for: "ready", count: workers.count, timeout: .seconds(120)))
        var lockFD: Int32 = -1
        if let lockedZone {
            lockFD = open(lockedZone.appendingPathComponent("lock").path, O_RDWR)
            try #require(lockFD >= 0 && flock(lockFD, LOCK_EX) == 0)
        }
        for worker in workers { try worker.send("go") }
        if lockFD >= 0 {
            try #require(await events.wait(for: "editing", count: workers.count, timeout: .seconds(120)))
            flock(lockFD, LOCK_UN)
            close(lockFD)
        }
        try #require(await events.wait(for: "done", count: workers.count, timeout: .seconds(300)), "every process committed")
        for worker in workers { try worker.send("report") }
        try #require(await events.wait(for: "final", count: workers.count, timeout: .seconds(180)), "every process caught up")
        for worker in workers { #expect(try await worker.waitForExit() == 0) }
        for reader in readers { await reader.value }

        let ended = try Self.names.indices.map { index in
            let output = directory.url.appendingPathComponent("final-\(Self.names[index]).json")
            return Final(line: finals.value[index] ?? "", bytes: try Data(contentsOf: output))
        }
        return (ended, merges.value)
    }

    @Test func fourProcessesCommitting500TimesEachEndWithTheSame2000Records() async throws {
        let directory = try TemporaryDirectory("four-processes")
        defer { directory.remove() }
        let perProcess = 500
        let (finals, _) = try await runEditors(directory) { _ in ["--append", "\(perProcess)"] }

        // Every process ends with the same array, byte for byte.
        #expect(Set(finals.map(\.line)).count == 1, "\(finals.map(\.line))")
        #expect(Set(finals.map(\.bytes)).count == 1)
        let records = try JSONDecoder().decode([EditRecord].self, from: finals[0].bytes)
        let expected = Self.names.flatMap { name in (0..<perProcess).map { "\(name)-\($0)" } }
        #expect(records.count == 2000)
        #expect(Set(records.map(\.id)) == Set(expected))

        // The database: 2,000 records, each stored once, one sequence number per commit.
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await database.fetchAll(in: zone)
        #expect(all.records.count == 2000)
        #expect(all.records.allSatisfy { $0.version == 1 })
        #expect(all.token.sequence == 2000, "4 × 500 commits, none lost, none stored twice")
        #expect(Set(all.records.map(\.writer)).count == 4)
        let (snapshot, journal) = try Reliability.storedLines(in: database.directory(of: zone))
        let lines = (snapshot + journal).compactMap { $0["id"] as? String }
        #expect(lines.count == 2000 && Set(lines).count == 2000, "no record is in the files twice")
        #expect(database.problems.isEmpty)
        Reliability.report("concurrency", [
            "processes": 4, "commits": all.token.sequence, "records": records.count,
            "duplicates": lines.count - Set(lines).count, "distinct-final-arrays": Set(finals.map(\.bytes)).count,
            "records-lost": Set(expected).subtracting(records.map(\.id)).count,
        ])
    }

    @Test(arguments: ["changedKeys", "lastWriterWins"])
    func concurrentEditsOfTheSameRecordsSettleTheSameWayInEveryProcess(policy: String) async throws {
        let directory = try TemporaryDirectory("concurrent-edits")
        defer { directory.remove() }
        let shared = 10
        let rounds = 8
        let seeder = try JSONFileDatabase(isolatedDirectory: directory.url)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let originals = (0..<shared).map { EditRecord(id: "shared-\($0)", owner: "test") }
        try await seeder.commit(
            try originals.map {
                .save($0.id, fields: try encoder.encode($0), baseVersion: 0, timestamp: HybridLogicalClock.shared.now())
            },
            to: zone)

        let (finals, merges) = try await runEditors(directory, holdingLock: seeder.directory(of: zone)) { _ in
            ["--shared", "\(shared)", "--rounds", "\(rounds)", "--policy", policy]
        }
        if policy == "changedKeys" {
            // The first round's edits were all based on version 1: every process but the
            // first to commit had to merge each record.
            #expect(merges >= 3 * shared, "conflicts settled by merging: \(merges)")
        }

        #expect(Set(finals.map(\.line)).count == 1, "every process settled alike: \(finals.map(\.line))")
        #expect(Set(finals.map(\.bytes)).count == 1)
        let records = try JSONDecoder().decode([EditRecord].self, from: finals[0].bytes)
        #expect(records.map(\.id) == originals.map(\.id).sorted())
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = try await database.fetchAll(in: zone).records
            .map { try JSONDecoder().decode(EditRecord.self, from: $0.fields ?? Data()) }
            .sorted { $0.id < $1.id }
        #expect(stored == records, "what every process shows is what is stored")
        for record in records {
            #expect(Self.names.contains(record.last), "\(record)")
            if policy == "changedKeys" {
                // A field only one process changes keeps its change: no process's edit is lost.
                #expect((0..<4).allSatisfy { record.field($0) == rounds }, "\(record)")
            } else {
                #expect((0..<4).allSatisfy { (0...rounds).contains(record.field($0)) }, "\(record)")
            }
        }
        let commits = try await database.currentToken(in: zone).sequence - 1
        Reliability.report("concurrent-edits-\(policy)", [
            "processes": 4, "records": shared, "rounds": rounds, "commits": commits, "merges": merges,
            "distinct-final-arrays": Set(finals.map(\.bytes)).count,
            "lost-field-edits": policy == "changedKeys"
                ? records.reduce(0) { count, record in count + (0..<4).filter { record.field($0) != rounds }.count }
                : 0,
        ])
    }

    /// A consumer of `changes` or `errors`, or a `flush()`, cancelled while other threads
    /// change the mirror: the cancelling thread holds the task's lock while the mirror's
    /// handler runs, and a thread handing out a change holds the mirror's lock while it
    /// resumes the task. Run in a process that is killed after a minute, so a deadlock fails
    /// the test instead of hanging the run.
    @Test func cancellingConsumersAndFlushesWhileTheMirrorChangesNeverDeadlocks() async throws {
        let result = try await MirrorWorkerRun.run(["mirror-cancel-race", "--rounds", "20000"], timeout: .seconds(120))
        #expect(result.status == 0, "mirror-cancel-race did not finish (deadlocked, killed after 60 s): \(result.standardError)")
        #expect(result.standardOutput == "ok 20000\n")
    }

    /// Found by the concurrent-edits run: another writer's change to a record, pulled while
    /// this mirror's own commit of that record was in flight, reached the mirror's record of
    /// stored versions but never its array; the next local edit, based on that version but
    /// made on the stale value, then undid the other writer's change.
    @Test func aRemoteEditPulledWhileACommitIsInFlightIsKeptByTheNextEdit() async throws {
        let memory = InMemoryDatabase()
        let other = memory.writer(named: "other")
        let database = ScriptedDatabase(memory)
        let edited = Chore(id: "edited-\(UUID().uuidString)", title: "edited")
        let witness = Chore(id: "witness-\(UUID().uuidString)", title: "witness")
        try await seed([edited, witness], into: memory)
        let mirror = try await Mirror<Chore>(database: database)
        let changes = AsyncCollector(mirror.changes())

        // The mirror's commit of `edited` is stored, but the mirror does not hear back yet.
        database.holdOutcomes()
        let position = try #require(mirror.dataModel.firstIndex(ofRecordID: edited.id))
        mirror.dataModel[position].rank = 1
        try await database.attempts.wait(forCount: 1, "the mirror's commit was stored")

        // Meanwhile another writer changes another field of `edited` (and `witness`, whose
        // arrival tells that the mirror pulled this commit).
        let stored = try await memory.fetch([edited.id], in: .public("Chore"))
        var remote = edited
        remote.rank = 1
        remote.notes = "remote"
        var remoteWitness = witness
        remoteWitness.notes = "remote"
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await other.commit([
            .save(edited.id, fields: try encoder.encode(remote), baseVersion: try #require(stored.first).version,
                  timestamp: HybridLogicalClock.shared.now()),
            .save(witness.id, fields: try encoder.encode(remoteWitness), baseVersion: 1,
                  timestamp: HybridLogicalClock.shared.now()),
        ], to: .public("Chore"))
        try await changes.wait("the mirror pulled the other writer's commit") { seen in
            seen.contains { $0.recordID == witness.id && $0.origin == .remote }
        }
        database.releaseOutcomes()
        try await flush(mirror)
        try await waitUntil(mirror, "the array shows the other writer's change") { records in
            records.first { $0.id == edited.id }?.notes == "remote"
        }

        // The next local edit keeps it.
        let again = try #require(mirror.dataModel.firstIndex(ofRecordID: edited.id))
        mirror.dataModel[again].done = true
        try await flush(mirror)
        let final = try await storedRecords(Chore.self, in: memory)[edited.id]
        #expect(final?.notes == "remote", "the other writer's change survived")
        #expect(final?.rank == 1 && final?.done == true, "and so did both of the mirror's")
    }
}
