import Foundation
import MagicMirror
import Testing

/// Real processes (`mirror-worker write`) sharing one database: concurrent writers lose
/// nothing, a writer killed with SIGKILL loses no acknowledged commit, and subscribers hear
/// other processes.
@Suite(.timeLimit(.minutes(5))) struct JSONFileProcessTests {
    let zone = ZoneID.public("Todo")

    /// Reads a worker's output until it exits; returns the record ids it acknowledged.
    private func acknowledged(by worker: WorkerProcess) async throws -> [String] {
        var ids: [String] = []
        for await line in worker.lines where !line.hasPrefix("ready ") { ids.append(line) }
        return ids
    }

    /// Every line of the zone's files parses as JSON; returns the journal's lines.
    private func checkFiles(of db: JSONFileDatabase) throws -> [[String: Any]] {
        let zoneDirectory = db.directory(of: zone)
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        if FileManager.default.fileExists(atPath: snapshot.path) {
            _ = try JSONFileTestSupport.jsonObject(snapshot)
        }
        return try JSONFileTestSupport.jsonLines(JSONFileTestSupport.journal(in: zoneDirectory))
    }

    @Test func twoProcessesAppendingToOneZoneLoseNothing() async throws {
        let directory = try TemporaryDirectory("two-processes")
        defer { directory.remove() }
        let count = 300
        // A small compaction threshold makes the writers also compact under each other.
        let workers = try ["A", "B"].map { prefix in
            try WorkerProcess([
                "write", "--db", directory.path, "--count", "\(count)", "--prefix", "\(prefix)",
                "--compaction-threshold", "16384",
            ])
        }
        let results = try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in workers { group.addTask { try await acknowledged(by: worker) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for worker in workers { #expect(try await worker.waitForExit() == 0) }
        #expect(results.map(\.count) == [count, count])

        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await db.fetchAll(in: zone)
        let expected = Set((0..<count).flatMap { ["A\($0)", "B\($0)"] })
        #expect(all.records.count == 2 * count)
        #expect(Set(all.records.map(\.id)) == expected)
        #expect(all.token.sequence == 2 * count, "one sequence number per commit: none lost, none stored twice")
        #expect(Set(all.records.map(\.writer)).count == 2)
        let lines = try checkFiles(of: db)
        let sequences = lines.compactMap { $0["seq"] as? Int }
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
        #expect(db.problems.isEmpty)
    }

    /// How a writer dies: killed from outside after some acknowledged commits, or killing
    /// itself at a chosen call of the file-system seam.
    struct Death: Sendable, CustomTestStringConvertible {
        var name: String
        var arguments: [String]
        /// Kill from outside after this many acknowledged ids; `nil` when the worker kills
        /// itself.
        var killAfter: Int?
        /// Whether the death must leave a torn tail to cut.
        var leavesTornTail = false
        var testDescription: String { name }
    }

    static let deaths: [Death] = [
        Death(name: "killed after 3 commits", arguments: ["--batch", "7", "--padding", "600"], killAfter: 3),
        Death(name: "killed after 60 commits", arguments: ["--batch", "7", "--padding", "600"], killAfter: 60),
        Death(
            name: "dies in the middle of appending a 7-record commit",
            arguments: ["--batch", "7", "--padding", "200", "--crash-at", "write:9:1500"], leavesTornTail: true),
        Death(
            name: "dies in compaction before the rename",
            arguments: ["--compaction-threshold", "4000", "--crash-at", "rename:1"]),
        Death(
            name: "dies in compaction after the rename",
            arguments: ["--compaction-threshold", "4000", "--crash-at", "unlink:1"]),
    ]

    @Test(arguments: deaths)
    func aWriterKilledMidWriteKeepsEveryAcknowledgedCommit(death: Death) async throws {
        let directory = try TemporaryDirectory("sigkill")
        defer { directory.remove() }
        // Some history first, so the dying writer appends to an existing zone.
        let before = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await before.commit([jsonSave("earlier", ["v": 1])], to: zone)
        var acknowledgedIDs = ["earlier"]

        let worker = try WorkerProcess(
            ["write", "--db", directory.path, "--count", "1000000", "--prefix", "k"] + death.arguments)
        for await line in worker.lines where !line.hasPrefix("ready ") {
            acknowledgedIDs.append(line)
            if acknowledgedIDs.count - 1 == death.killAfter { worker.kill() }
        }
        _ = try await worker.waitForExit()
        #expect(worker.wasKilled, "the worker was killed")
        #expect(acknowledgedIDs.count > 1)

        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = Set(try await db.fetchAll(in: zone).records.map(\.id))
        let missing = acknowledgedIDs.filter { !stored.contains($0) }
        #expect(missing.isEmpty, "acknowledged but lost: \(missing.prefix(5))")
        #expect(db.problems.allSatisfy { $0.kind == .corruptEntry })
        if death.leavesTornTail {
            #expect(db.problems.contains { $0.message.contains("cut off") }, "the torn tail was cut")
        }
        // Whatever the kill left is repaired: every line parses and writing goes on.
        _ = try checkFiles(of: db)
        let after = try await db.commit([jsonSave("after", ["v": 1])], to: zone)
        #expect(after.isApplied)
        #expect(try await JSONFileDatabase(isolatedDirectory: directory.url).fetch(["after"], in: zone).count == 1)
    }

    @Test func aSubscriberHearsAnotherProcessesCommits() async throws {
        let directory = try TemporaryDirectory("cross-process")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, options: .init(pollInterval: .milliseconds(20)))
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
        let subscription = try db.subscribe(to: zone) { continuation.yield($0) }
        defer { subscription.cancel() }
        let worker = try WorkerProcess(["write", "--db", directory.path, "--count", "3", "--prefix", "w"])
        let ids = try await acknowledged(by: worker)
        #expect(try await worker.waitForExit() == 0)
        #expect(ids == ["w0", "w1", "w2"])

        let heard = MutexBox<Set<String>>([])
        _ = try await firstValue(of: stream, within: testTimeout) { notification in
            #expect(notification.writer != db.writerID)
            #expect(notification.databaseIdentifier == db.identifier)
            heard.update { $0.formUnion(notification.recordIDs) }
            return heard.value.isSuperset(of: ids)
        }
        #expect(try await db.fetchAll(in: zone).records.count == 3)
    }
}
