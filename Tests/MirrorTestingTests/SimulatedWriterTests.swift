import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct SimulatedWriterTests {
    let zone = ZoneID.public(SampleRecord.recordType)

    @Test func simulatedChangesBumpVersionsAndTokensAndNotifyEverySubscription() async throws {
        let database = InMemoryDatabase()
        let otherProcess = database.writer(named: "process-b")
        let heardHere = NotificationLog()
        let heardThere = NotificationLog()
        let here = try database.subscribe(to: zone, handler: heardHere.handler)
        let there = try otherProcess.subscribe(to: zone, handler: heardThere.handler)
        defer { here.cancel(); there.cancel() }

        var record = SampleRecord(title: "Milk")
        let created = try await database.simulateSave(record)
        #expect(created.version == 1)
        #expect(created.writer == InMemoryDatabase.simulatedWriterID)
        let afterCreate = try await database.currentToken(in: zone)
        #expect(afterCreate > .initial)

        record.title = "Oat milk"
        let updated = try await database.simulateSave(record, by: "alice")
        #expect(updated.version == 2)
        #expect(updated.writer == "alice")
        let afterUpdate = try await database.currentToken(in: zone)
        #expect(afterUpdate > afterCreate)

        let tombstone = try await database.simulateDelete(record)
        #expect(tombstone.version == 3)
        #expect(tombstone.isDeleted)
        let afterDelete = try await database.currentToken(in: zone)
        #expect(afterDelete > afterUpdate)

        // Delivered before each call returned, to both instances' subscriptions.
        for heard in [heardHere.all, heardThere.all] {
            #expect(heard.map(\.reason) == [.created, .updated, .deleted])
            #expect(heard.map(\.recordIDs) == Array(repeating: [record.recordID], count: 3))
            #expect(heard.map(\.token) == [afterCreate, afterUpdate, afterDelete])
            #expect(heard.map(\.writer) == [InMemoryDatabase.simulatedWriterID, "alice", InMemoryDatabase.simulatedWriterID])
            #expect(heard.allSatisfy { $0.databaseIdentifier == database.identifier && $0.zone == zone })
        }
        // A reader that pulls changes sees them like any other commit.
        let changes = try await database.changes(in: zone, since: afterCreate)
        #expect(changes.records.map(\.version) == [3])
        #expect(changes.records.first?.isDeleted == true)
    }

    @Test func aSimulatedSaveReplacesWhateverIsStoredAndMakesStaleCommitsConflict() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("r1", ["v": 1])], to: zone)
        try await database.commit([newRecord("r1", ["v": 2], base: 1)], to: zone)
        let stored = try await database.simulateSave(id: "r1", fields: fields(["v": 3]), in: zone)
        #expect(stored.version == 3)
        // Code under test that still holds version 2 now conflicts with the simulated change.
        let stale = try await database.commit([newRecord("r1", ["v": 4], base: 2)], to: zone)
        guard case .conflict(let current?) = stale.results.first else {
            Issue.record("expected a conflict, got \(stale.results)"); return
        }
        #expect(current.version == 3)
        #expect(current.writer == InMemoryDatabase.simulatedWriterID)
        #expect(current.fields == fields(["v": 3]))
    }

    @Test func aRecordCanBeRecreatedAfterASimulatedDelete() async throws {
        let database = InMemoryDatabase()
        let record = SampleRecord(title: "Again")
        try await database.simulateSave(record)
        try await database.simulateDelete(record)
        let recreated = try await database.simulateSave(record)
        #expect(recreated.version == 3)
        #expect(try database.records(SampleRecord.self) == [record])
    }

    @Test func simulatedChangesIgnoreTheInstancesFaults() async throws {
        let database = InMemoryDatabase()
        database.availability = .unavailable
        database.failNextCommits(5, with: .ioFailure)
        database.commitLatency = .seconds(3600)
        let record = SampleRecord()
        try await database.simulateSave(record)
        try await database.simulateDelete(record)
        #expect(database.remainingCommitFailures == 5)
        #expect(database.storedRecord(record.recordID, in: zone)?.isDeleted == true)
    }

    @Test func simulatedChangesToPrivateZones() async throws {
        let database = InMemoryDatabase()
        let record = SampleRecord(title: "Mine")
        try await database.simulateSave(record, scope: .private, user: try MirrorUser(name: "alice"))
        #expect(try database.records(SampleRecord.self, scope: .private, user: try MirrorUser(name: "alice")) == [record])
        #expect(try database.records(SampleRecord.self, scope: .private, user: try MirrorUser(name: "bob")).isEmpty)
        #expect(try database.records(SampleRecord.self).isEmpty)
        let missingUser = await expectError(.invalidName) {
            try await database.simulateSave(record, scope: .private)
        }
        #expect(missingUser?.message.contains("user") == true)
        await expectError(.invalidName) { try await database.simulateSave(record, scope: .public, user: try MirrorUser(name: "alice")) }
        await expectError(.invalidName) { try await database.simulateSave(record, scope: .private, user: try MirrorUser(name: "a/b")) }
        #expect(database.zones == [.private(SampleRecord.recordType, user: "alice")])
    }

    @Test func badSimulatedChangesAreRefusedClearlyAndStoreNothing() async throws {
        let database = InMemoryDatabase()
        let heard = NotificationLog()
        let subscription = try database.subscribe(to: zone, handler: heard.handler)
        defer { subscription.cancel() }
        let notAnObject = await expectError(.invalidRecord) {
            try await database.simulateSave(id: "r1", fields: Data("[1, 2]".utf8), in: zone)
        }
        #expect(notAnObject?.recordIDs == ["r1"])
        await expectError(.invalidName) {
            try await database.simulateSave(id: "../escape", fields: fields(["v": 1]), in: zone)
        }
        let missing = await expectError(.notFound) { try await database.simulateDelete(id: "ghost", in: zone) }
        #expect(missing?.recordIDs == ["ghost"])
        #expect(missing?.message.contains("ghost") == true)
        // Deleting a record twice is a mistake too.
        try await database.simulateSave(id: "once", fields: fields(["v": 1]), in: zone)
        try await database.simulateDelete(id: "once", in: zone)
        await expectError(.notFound) { try await database.simulateDelete(id: "once", in: zone) }

        #expect(heard.all.map(\.reason) == [.created, .deleted])
        #expect(database.storedRecords(in: zone, includingDeleted: true).map(\.id) == ["once"])
        let log = database.commitLog
        #expect(log.allSatisfy { $0.isSimulated })
        #expect(log.map(\.isFailed) == [true, true, true, false, false, true])
        #expect(log.compactMap(\.error?.kind) == [.invalidRecord, .invalidName, .notFound, .notFound])
    }

    @Test func concurrentSimulatedSavesOfOneRecordNeverConflict() async throws {
        let database = InMemoryDatabase()
        let record = SampleRecord()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<20 {
                group.addTask {
                    var copy = record
                    copy.priority = writer
                    try await database.simulateSave(copy, by: "writer-\(writer)")
                }
            }
            try await group.waitForAll()
        }
        #expect(database.storedRecord(record.recordID, in: zone)?.version == 20)
        #expect(database.commitLog.allSatisfy { $0.isApplied })
    }
}
