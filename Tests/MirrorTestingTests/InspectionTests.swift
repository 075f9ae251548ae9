import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct InspectionTests {
    let zone = ZoneID.public("Todo")

    @Test func recordsAreDecodedLiveAndInTheOrderTheyWereLastChanged() async throws {
        let database = InMemoryDatabase()
        var first = SampleRecord(title: "first")
        let second = SampleRecord(title: "second")
        let third = SampleRecord(title: "third")
        for record in [first, second, third] { try await database.simulateSave(record) }
        first.isDone = true
        try await database.simulateSave(first)
        try await database.simulateDelete(second)
        #expect(try database.records(SampleRecord.self) == [third, first])
        let zone = ZoneID.public(SampleRecord.recordType)
        #expect(database.storedRecords(in: zone).map(\.id) == [third.recordID, first.recordID])
        let all = database.storedRecords(in: zone, includingDeleted: true)
        #expect(all.map(\.id) == [third.recordID, first.recordID, second.recordID])
        #expect(all.map(\.isDeleted) == [false, false, true])
        #expect(database.storedRecord(second.recordID, in: zone)?.version == 2)
        #expect(database.storedRecord(second.recordID, in: zone)?.isDeleted == true)
        #expect(database.storedRecord("missing", in: zone) == nil)
        // Compaction drops the tombstone.
        database.compact(zone)
        #expect(database.storedRecord(second.recordID, in: zone) == nil)
        #expect(database.storedRecords(in: .public("Untouched")).isEmpty)
    }

    @Test func aRecordThatDoesNotDecodeIsNamed() async throws {
        let database = InMemoryDatabase()
        let zone = ZoneID.public(SampleRecord.recordType)
        try await database.simulateSave(SampleRecord(title: "fine"))
        try await database.simulateSave(id: "old-format", fields: fields(["name": "x"]), in: zone)
        do {
            _ = try database.records(SampleRecord.self)
            Issue.record("a record that does not decode was returned")
        } catch {
            #expect(error.kind == .decodingFailed)
            #expect(error.recordIDs == ["old-format"])
            #expect(error.recordType == SampleRecord.recordType)
            #expect(error.underlying is DecodingError)
        }
        // The raw form still shows it.
        #expect(database.storedRecords(in: zone).count == 2)
    }

    @Test func theCommitLogRecordsEveryCommitWithItsWriterOperationsAndOutcome() async throws {
        let database = InMemoryDatabase()
        let other = database.writer(named: "other")
        let applied = newRecord("a")
        try await database.commit([applied], to: zone)
        try await other.commit([newRecord("b")], to: zone)
        let stale = newRecord("a", ["v": 2], base: 7)
        try await database.commit([stale], to: zone)
        database.failNextCommits(1, with: .diskFull)
        _ = try? await database.commit([newRecord("c")], to: zone)
        _ = try? await database.commit([newRecord("bad/id")], to: zone)
        try await database.simulateSave(id: "s", fields: fields(["v": 1]), in: zone)

        let log = database.commitLog
        #expect(log.map(\.index) == Array(0..<6))
        #expect(log.map(\.writer) == [database.writerID, "other", database.writerID, database.writerID,
                                      database.writerID, InMemoryDatabase.simulatedWriterID])
        #expect(log.map(\.isSimulated) == [false, false, false, false, false, true])
        #expect(log.map(\.isApplied) == [true, true, false, false, false, true])
        #expect(log.map(\.isConflict) == [false, false, true, false, false, false])
        #expect(log.compactMap(\.error?.kind) == [.diskFull, .invalidName])
        #expect(log[0].operations == [applied])
        #expect(log[2].operations == [stale])
        #expect(log.allSatisfy { $0.zone == zone })
        #expect(log[1].outcome?.token == ChangeToken(generation: 0, sequence: 2))
        #expect(zip(log, log.dropFirst()).allSatisfy { $0.time <= $1.time })
        #expect(log[3].description.contains("failed: diskFull"))

        database.clearCommitLog()
        #expect(database.commitLog.isEmpty)
        try await database.commit([newRecord("d")], to: zone)
        #expect(database.commitLog.map(\.index) == [0])
    }

    @Test func commitLogUpdatesStartWithTheCurrentLogAndFollowEveryCommit() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("before")], to: zone)
        let updates = database.commitLogUpdates
        let waiter = Task {
            try await updates.waitUntil(timeout: .seconds(120), "three commits") { $0.count == 3 }
        }
        let other = database.writer(named: "other")
        try await other.commit([newRecord("x")], to: zone)
        try await database.simulateSave(id: "y", fields: fields(["v": 1]), in: zone)
        let log = try await waiter.value
        #expect(log.map(\.recordIDs) == [["before"], ["x"], ["y"]])
        // A new stream starts from the log as it is.
        let current = try await database.commitLogUpdates.waitUntil(timeout: .seconds(120)) { _ in true }
        #expect(current.count == 3)
    }

    @Test func anEndedWaitOnTheCommitLogLeavesNoReaderBehind() async throws {
        let database = InMemoryDatabase()
        // A wait that matches at once, and one that times out while its reader is suspended.
        try await database.commitLogUpdates.waitUntil(timeout: .seconds(120)) { $0.isEmpty }
        await expectError(.timedOut) {
            try await database.commitLogUpdates.waitUntil(timeout: .milliseconds(50)) { $0.count == 5 }
        }
        #expect(database.commitLogReaderCount == 0)
        try await database.commit([newRecord("a")], to: zone)
        #expect(database.commitLog.count == 1)
    }

    @Test func aCancelledReaderOfTheCommitLogEnds() async throws {
        let database = InMemoryDatabase()
        let (started, signal) = AsyncStream.makeStream(of: Int.self)
        let reader = Task {
            var seen = 0
            for await _ in database.commitLogUpdates {
                seen += 1
                signal.yield(seen)
            }
            return seen
        }
        // The first element (the current, empty log) arrives at once; then the reader waits.
        try await started.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        reader.cancel()
        #expect(try await value(of: reader) == 1)
        #expect(database.commitLogReaderCount == 0)
    }

    @Test func clearingTheLogIsDeliveredToItsReaders() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("a")], to: zone)
        let updates = database.commitLogUpdates
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.count == 1)
        database.clearCommitLog()
        #expect(await iterator.next()?.count == 0)
        try await database.commit([newRecord("b")], to: zone)
        try await database.commit([newRecord("c")], to: zone)
        // A reader that fell behind gets the latest log.
        #expect(await iterator.next()?.map(\.recordIDs) == [["b"], ["c"]])
    }
}
