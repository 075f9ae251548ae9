import Foundation
import MagicMirror
import Testing

/// Each way of mutating `dataModel` becomes the right saves and deletes.
@Suite(.timeLimit(.minutes(5))) struct MirrorMutationTests {
    /// Checks that the database holds exactly what the mirror shows.
    private func expectStored(
        _ mirror: Mirror<Chore>, in database: any RecordDatabase,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let stored = try await storedRecords(Chore.self, in: database)
        let shown = Dictionary(uniqueKeysWithValues: mirror.dataModel.map { ($0.id, $0) })
        #expect(stored == shown, sourceLocation: sourceLocation)
    }

    @Test(arguments: DatabaseFactory.all)
    func appendInsertAndEditBecomeSaves(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)

        mirror.dataModel.append(Chore(title: "milk"))
        mirror.dataModel.append(contentsOf: [Chore(title: "eggs"), Chore(title: "bread")])
        mirror.dataModel.insert(Chore(title: "first"), at: 0)
        mirror.dataModel += [Chore(title: "last")]
        // The array changes at once.
        #expect(mirror.dataModel.map(\.title) == ["first", "milk", "eggs", "bread", "last"])
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)

        mirror.dataModel[2].title = "brown eggs"
        mirror.dataModel[2].rank += 1
        mirror.dataModel[0] = Chore(id: mirror.dataModel[0].id, title: "very first")
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)
        let stored = try await storedRecords(Chore.self, in: opened.database)
        #expect(stored[mirror.dataModel[2].id]?.title == "brown eggs")
        #expect(stored[mirror.dataModel[2].id]?.rank == 1)
    }

    @Test(arguments: DatabaseFactory.all)
    func removalsBecomeDeletes(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed((0..<8).map { Chore(id: "c\($0)", title: "chore \($0)") }, into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)

        let removed = mirror.dataModel.remove(at: 3)
        #expect(removed.id == "c3")
        mirror.dataModel.removeLast()
        mirror.dataModel.removeFirst()
        mirror.dataModel.removeAll { $0.id == "c5" }
        #expect(mirror.dataModel.map(\.id) == ["c1", "c2", "c4", "c6"])
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)

        mirror.dataModel.removeAll()
        try await mirror.flush()
        #expect(try await storedRecords(Chore.self, in: opened.database).isEmpty)
        // Deletes leave tombstones that other readers see.
        let changes = try await opened.database.changes(in: .public("Chore"), since: .initial)
        #expect(changes.records.filter(\.isDeleted).count == 8)
    }

    @Test(arguments: DatabaseFactory.all)
    func assigningAWholeArraySavesAndDeletesTheDifference(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed((0..<5).map { Chore(id: "c\($0)", title: "chore \($0)") }, into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)

        var next = mirror.dataModel.filter { $0.id != "c1" }
        next[0].done = true
        next.append(Chore(id: "c9", title: "new"))
        mirror.dataModel = next
        #expect(mirror.dataModel.map(\.id) == ["c0", "c2", "c3", "c4", "c9"])
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)

        mirror.dataModel = [Chore(id: "c2", title: "only")]
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)
        #expect(try await storedRecords(Chore.self, in: opened.database).count == 1)
    }

    @Test(arguments: DatabaseFactory.all)
    func editingOnlyAFieldIsCommitted(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let chore = Chore(title: "water the plants")
        try await seed([chore], into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)

        mirror.dataModel[0].done = true
        try await mirror.flush()

        let stored = try #require(try await opened.database.fetch([chore.id], in: .public("Chore")).first)
        #expect(stored.version == 2)
        #expect(try JSONDecoder().decode(Chore.self, from: stored.fields!).done)
        // A fresh mirror loads the edit.
        let fresh = try await Mirror<Chore>(database: try await opened.otherWriter())
        #expect(fresh.dataModel.first?.done == true)
    }

    @Test(arguments: DatabaseFactory.all)
    func mutationsThatChangeNothingCommitNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed((0..<6).map { Chore(id: "c\($0)", title: "chore \($0)", rank: 6 - $0) }, into: opened.database)
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: database)

        mirror.dataModel[1].title = mirror.dataModel[1].title
        mirror.dataModel.sort { $0.rank < $1.rank }
        mirror.dataModel.swapAt(0, 5)
        mirror.dataModel = RecordArray(mirror.dataModel.reversed())
        #expect(mirror.pendingChanges.isEmpty)
        try await mirror.flush()
        #expect(database.attempts.items.isEmpty)
        #expect(Set(mirror.dataModel.map(\.id)) == Set((0..<6).map { "c\($0)" }))
    }

    @Test(arguments: DatabaseFactory.all)
    func changesMadeBeforeACommitAreCoalesced(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: database)
        database.hold()

        let kept = Chore(title: "draft")
        let dropped = Chore(title: "mistake")
        mirror.dataModel.append(kept)
        mirror.dataModel.append(dropped)
        for number in 1...10 { mirror.dataModel[0].rank = number }
        mirror.dataModel[0].title = "final"
        mirror.dataModel.remove(at: 1)
        #expect(mirror.pendingChanges.map(\.recordID).contains(kept.id))
        database.release()
        try await mirror.flush()

        // One save of the final value; the record created and deleted was never stored.
        let saves = database.attempts.items.flatMap(\.recordIDs)
        #expect(saves.filter { $0 == kept.id }.count == 1)
        #expect(!saves.contains(dropped.id))
        let stored = try #require(try await opened.database.fetch([kept.id], in: .public("Chore")).first)
        #expect(stored.version == 1)
        #expect(try JSONDecoder().decode(Chore.self, from: stored.fields!) == mirror.dataModel[0])
        let history = try await opened.database.changes(in: .public("Chore"), since: .initial)
        #expect(!history.records.contains { $0.id == dropped.id })
    }

    @Test(arguments: DatabaseFactory.all)
    func changesAreCommittedInOrderInBatches(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(
            database: database, configuration: MirrorConfiguration(maximumBatchSize: 4))
        database.hold()
        let chores = (0..<10).map { Chore(id: "c\($0)", title: "chore \($0)") }
        for chore in chores { mirror.dataModel.append(chore) }
        database.release()
        try await mirror.flush()

        let sent = database.attempts.items
        #expect(sent.allSatisfy { $0.recordIDs.count <= 4 })
        #expect(sent.count < 10)
        #expect(sent.flatMap(\.recordIDs) == chores.map(\.id))
        try await expectStored(mirror, in: opened.database)
    }

    /// A record appended (or inserted) under an id the array holds replaces that record in
    /// its place, is committed as an edit, and is no error (#19.5).
    @Test(arguments: DatabaseFactory.all)
    func aSecondRecordWithTheSameIDReplacesTheFirstInItsPlace(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let original = Chore(title: "original")
        try await seed([original], into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)
        let changes = mirror.changes()

        var copy = original
        copy.title = "replacement"
        let fine = Chore(title: "fine")
        mirror.dataModel.append(fine)
        mirror.dataModel.append(copy)

        #expect(mirror.dataModel.map(\.title) == ["replacement", "fine"])
        #expect(mirror.dataModel.firstIndex(ofRecordID: original.recordID) == 0)
        #expect(mirror.lastError == nil)
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)
        let stored = try await storedRecords(Chore.self, in: opened.database)
        #expect(stored[original.id]?.title == "replacement")
        var kinds: [MirrorChange<Chore>.Kind] = []
        for await change in changes where change.recordID == original.id && change.state == .pending {
            kinds.append(change.kind)
            break
        }
        #expect(kinds == [.updated])

        // Inserting a copy at the front replaces the record where it stands too.
        copy.title = "inserted"
        mirror.dataModel.insert(copy, at: 0)
        #expect(mirror.dataModel.map(\.title) == ["inserted", "fine"])
        var twice = fine
        twice.title = "fine 2"
        var thrice = fine
        thrice.title = "fine 3"
        mirror.dataModel.append(contentsOf: [twice, thrice])   // the last new copy wins
        #expect(mirror.dataModel.map(\.title) == ["inserted", "fine 3"])
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)
        #expect(mirror.lastError == nil)
    }

    @Test(arguments: DatabaseFactory.all)
    func singleElementMutationsKeepTheIDIndexRight(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed((0..<50).map { Chore(id: String(format: "c%02d", $0), title: "\($0)") }, into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)

        mirror.dataModel.insert(Chore(id: "new-front", title: "front"), at: 0)
        mirror.dataModel.remove(at: 10)
        mirror.dataModel.insert(Chore(id: "new-middle", title: "middle"), at: 25)
        mirror.dataModel[40].title = "edited"
        mirror.dataModel.swapAt(3, 44)
        let model = mirror.dataModel
        for (index, chore) in model.enumerated() {
            #expect(model.firstIndex(ofRecordID: chore.id) == index)
        }
        #expect(model.firstIndex(ofRecordID: "c09") == nil)
        try await mirror.flush()
        try await expectStored(mirror, in: opened.database)
    }
}
