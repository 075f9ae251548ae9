#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Durable and relaxed commits, group commit, and failures injected through the file-system
/// seam: a failed commit stores nothing visible and the next one succeeds.
@Suite(.timeLimit(.minutes(5))) struct JSONFileDurabilityTests {
    let zone = ZoneID.public("Todo")

    @Test func durableCommitsAreFlushedAndRelaxedOnesAreNot() async throws {
        let directory = try TemporaryDirectory("durability")
        defer { directory.remove() }
        for durability in [JSONFileDatabase.Durability.durable, .relaxed] {
            let faulty = FaultyFileSystem()
            let db = try JSONFileDatabase(
                isolatedDirectory: directory.url.appendingPathComponent("\(durability)"),
                options: .init(durability: durability), fileSystem: faulty.fileSystem)
            try await db.commit([jsonSave("first", ["v": 1])], to: zone)  // creates the zone
            let before = (faulty.count(.fsync), faulty.count(.write))
            for index in 0..<5 { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
            #expect(faulty.count(.write) - before.1 == 5)
            #expect(faulty.count(.fsync) - before.0 == (durability == .durable ? 5 : 0), "\(durability)")
            // Either way, another process sees the commits at once.
            let other = try JSONFileDatabase(isolatedDirectory: db.directory)
            #expect(try await other.fetchAll(in: zone).records.count == 6)
        }
    }

    @Test func waitingCommitsShareOneAppendAndOneFsync() async throws {
        let directory = try TemporaryDirectory("group-commit")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let (queued, queueContinuation) = AsyncStream.makeStream(of: Int.self)
        let calls = MutexBox(0)
        let counting = MutexBox(false)
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem) { _, _ in
            guard counting.value else { return }
            calls.update { $0 += 1 }
            queueContinuation.yield(calls.value)
        }
        try await db.commit([jsonSave("first", ["v": 1])], to: zone)
        let before = (faulty.count(.fsync), faulty.count(.write))

        // Hold the zone's lock as another process would, so commits pile up behind it.
        let lockFD = open(db.directory(of: zone).appendingPathComponent("lock").path, O_RDWR)
        #expect(lockFD >= 0)
        defer { close(lockFD) }
        #expect(flock(lockFD, LOCK_EX) == 0)
        counting.update { $0 = true }
        let waiting = 19
        let commits = Task {
            try await withThrowingTaskGroup(of: CommitOutcome.self) { group in
                for index in 0...waiting {
                    group.addTask { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        // One commit finds the lock taken and waits for it; the others queue behind it.
        _ = try await firstValue(of: queued, within: testTimeout) { $0 == waiting }
        #expect(flock(lockFD, LOCK_UN) == 0)
        let outcomes = try await commits.value
        counting.update { $0 = false }

        #expect(outcomes.count == waiting + 1)
        #expect(outcomes.allSatisfy { $0.isApplied })
        // The first commit may go alone (if the flusher took it before the others queued);
        // every other commit shares one append and one flush.
        let appends = faulty.count(.write) - before.1
        #expect((1...2).contains(appends), "\(waiting + 1) commits took \(appends) appends")
        #expect(faulty.count(.fsync) - before.0 == appends)
        #expect(Set(outcomes.map(\.token.sequence)) == Set(2...(waiting + 2)), "still one sequence per commit")
        let lines = try JSONFileTestSupport.jsonLines(db.directory(of: zone).appendingPathComponent("journal-0.ndjson"))
        #expect(lines.count == waiting + 2)
        #expect(lines.filter { $0["end"] as? Bool == true }.count == 1 + appends,
                "one end marker per append: a partly written append is never applied")
        #expect(lines.last?["end"] as? Bool == true)
        // A reader applies the grouped commits one by one.
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await reader.fetchAll(in: zone)
        #expect(all.records.count == waiting + 2)
        #expect(all.token.sequence == waiting + 2)
        let sinceLeader = try await reader.changes(in: zone, since: ChangeToken(generation: 0, sequence: waiting + 1))
        #expect(sinceLeader.records.count == 1)
    }

    static let failures: [(FileSystem.Operation, Int32, MirrorError.Kind)] = [
        (.write, ENOSPC, .diskFull),
        (.write, EIO, .ioFailure),
        (.write, EACCES, .permissionDenied),
        (.fsync, EIO, .ioFailure),
        (.fsync, ENOSPC, .diskFull),
    ]

    @Test(arguments: failures)
    func aFailedAppendLeavesNothingVisible(operation: FileSystem.Operation, code: Int32, kind: MirrorError.Kind) async throws {
        let directory = try TemporaryDirectory("inject")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let first = try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = db.directory(of: zone).appendingPathComponent("journal-0.ndjson")
        let intact = try JSONFileTestSupport.journalData(journal)
        let received = MutexBox<[String]>([])
        let subscription = try db.subscribe(to: zone) { received.append(contentsOf: $0.recordIDs) }
        defer { subscription.cancel() }

        // A write that fails after writing part of its bytes; or a flush that fails.
        faulty.failNext(operation, errno: code, afterBytes: 40)
        do {
            try await db.commit([jsonSave("b", ["v": 1]), jsonSave("c", ["v": 1])], to: zone)
            Issue.record("the commit succeeded")
        } catch let error as MirrorError {
            #expect(error.kind == kind)
            #expect(error.recordIDs == ["b", "c"])
            #expect(error.recordType == "Todo")
            #expect(error.file?.hasSuffix("journal-0.ndjson") == true)
        }
        if operation == .write {
            #expect(try JSONFileTestSupport.journalData(journal) == intact, "the partial append was cut back")
            #expect(try await db.currentToken(in: zone) == first.token)
        } else {
            // The append was complete when its flush failed, so readers elsewhere may have
            // seen it: it is cut back and the zone moves to a new generation, which makes
            // every reader reload.
            let token = try await db.currentToken(in: zone)
            #expect(token == ChangeToken(generation: 1, sequence: first.token.sequence))
        }
        #expect(try await db.fetch(["b", "c"], in: zone).isEmpty)
        #expect(received.value.isEmpty, "nothing was announced")
        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await other.fetchAll(in: zone).records.map(\.id) == ["a"])

        let retry = try await db.commit([jsonSave("b", ["v": 1]), jsonSave("c", ["v": 1])], to: zone)
        #expect(retry.isApplied)
        #expect(retry.token.sequence == first.token.sequence + 1)
        #expect(try storedIDs(in: db.directory(of: zone)) == ["a", "b", "c"], "each stored exactly once")
    }

    /// A commit large enough that its outcome and notifications are made while its append
    /// is written and flushed: what it returns and announces is what a small one would.
    @Test func aLargeCommitReturnsAndAnnouncesEveryRecordAsStored() async throws {
        let directory = try TemporaryDirectory("large-commit")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let received = MutexBox<[RemoteNotification]>([])
        let subscription = try db.subscribe(to: zone) { note in received.update { $0.append(note) } }
        defer { subscription.cancel() }
        let ids = (0..<(ZoneState.operationsCheckedInParallel + 50)).map { "r\($0)" }

        for (round, base) in [(1, 0), (2, 1)] {
            let outcome = try await db.commit(ids.map { jsonSave($0, ["v": base], base: base) }, to: zone)
            #expect(outcome.token == ChangeToken(generation: 0, sequence: round))
            let stored = try await db.fetch(ids, in: zone)
            #expect(outcome.results == stored.map { CommitOutcome.Result.applied($0) })
            #expect(stored.allSatisfy { $0.version == round })
            let notes = received.value
            #expect(notes.count == round)
            #expect(notes.last?.recordIDs == ids)
            #expect(notes.last?.reason == (round == 1 ? .created : .updated))
            #expect(notes.last?.token == outcome.token)
        }
    }

    @Test(arguments: [FileSystem.Operation.write, .fsync])
    func aFailedLargeAppendLeavesNothingVisible(operation: FileSystem.Operation) async throws {
        let directory = try TemporaryDirectory("inject-large")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let first = try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let received = MutexBox<[String]>([])
        let subscription = try db.subscribe(to: zone) { received.append(contentsOf: $0.recordIDs) }
        defer { subscription.cancel() }
        let ids = (0..<(ZoneState.operationsCheckedInParallel + 50)).map { "r\($0)" }

        faulty.failNext(operation, errno: EIO, afterBytes: 40)
        let refused = await expectMirrorError(.ioFailure) {
            try await db.commit(ids.map { jsonSave($0, ["v": 1]) }, to: zone)
        }
        #expect(refused?.recordIDs == ids)
        #expect(try await db.fetch(ids, in: zone).isEmpty)
        #expect(try await db.currentToken(in: zone).sequence == first.token.sequence)
        #expect(received.value.isEmpty, "nothing was announced")

        let retry = try await db.commit(ids.map { jsonSave($0, ["v": 1]) }, to: zone)
        #expect(retry.results.count == ids.count)
        #expect(try await db.fetch(ids, in: zone).count == ids.count)
    }

    /// The ids in a zone's snapshot and journal lines, in order, with repeats.
    private func storedIDs(in zoneDirectory: URL) throws -> [String] {
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        var ids: [String] = []
        if FileManager.default.fileExists(atPath: snapshot.path) {
            let records = try JSONFileTestSupport.jsonObject(snapshot)["records"] as? [[String: Any]] ?? []
            ids += records.compactMap { $0["id"] as? String }.sorted()
        }
        ids += try JSONFileTestSupport.jsonLines(JSONFileTestSupport.journal(in: zoneDirectory))
            .compactMap { $0["id"] as? String }
        return ids
    }

    @Test func aCutBackThatFailsIsFinishedByTheNextWriter() async throws {
        let directory = try TemporaryDirectory("inject-truncate")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        faulty.failNext(.write, errno: ENOSPC, afterBytes: 40)
        faulty.failNext(.truncate, errno: EIO)
        await #expect(throws: MirrorError.self) { try await db.commit([jsonSave("b", ["v": 1])], to: zone) }
        try await db.commit([jsonSave("c", ["v": 1])], to: zone)
        let journal = db.directory(of: zone).appendingPathComponent("journal-0.ndjson")
        #expect(try JSONFileTestSupport.jsonLines(journal).map { $0["id"] as? String } == ["a", "c"])
        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await other.fetchAll(in: zone).records.map(\.id)) == ["a", "c"])
    }

    @Test func aFailureCreatingAZoneStoresNothing() async throws {
        let directory = try TemporaryDirectory("inject-create")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        faulty.failNext(.mkdir, errno: EACCES)
        do {
            try await db.commit([jsonSave("a", ["v": 1])], to: zone)
            Issue.record("the commit succeeded")
        } catch let error as MirrorError {
            #expect(error.kind == .permissionDenied)
        }
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        #expect(try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: zone).records.count == 1)
    }
}
