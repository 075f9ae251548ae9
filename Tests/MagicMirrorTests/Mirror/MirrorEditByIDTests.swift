import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Editing by id while other writers change the array: an index found before a remote
/// delete names another record afterwards; an id always names the same one.
@Suite(.timeLimit(.minutes(5))) struct MirrorEditByIDTests {
    @Test func anEditByIDAfterARemoteDeleteEditsThatRecord() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        let (a, b, c) = (Chore(title: "a"), Chore(title: "b"), Chore(title: "c"))
        mirror.dataModel.append(contentsOf: [a, b, c])
        try await mirror.flush()
        let indexOfC = try #require(mirror.dataModel.firstIndex(ofRecordID: c.recordID))
        #expect(indexOfC == 2)

        try await database.simulateDelete(a)
        try await mirror.waitUntil(timeout: .seconds(120)) { $0.count == 2 }
        // The old index now points past the end (or at another record); the id does not.
        #expect(indexOfC >= mirror.dataModel.count || mirror.dataModel[indexOfC].id != c.id)
        mirror.dataModel[recordID: c.recordID]?.title = "c edited"
        #expect(mirror.dataModel.map(\.title) == ["b", "c edited"])
        #expect(mirror.dataModel[recordID: a.recordID] == nil)
        mirror.dataModel[recordID: a.recordID]?.title = "never"   // no record: nothing happens
        #expect(mirror.dataModel.count == 2)

        #expect(mirror.dataModel.remove(recordID: b.recordID)?.title == "b")
        #expect(mirror.dataModel.remove(recordID: b.recordID) == nil)
        mirror.dataModel[recordID: c.recordID] = nil
        #expect(mirror.dataModel.isEmpty)
        let d = Chore(title: "d")
        mirror.dataModel[recordID: d.recordID] = d
        try await mirror.flush()
        let stored = try await storedRecords(Chore.self, in: database)
        #expect(stored.keys.sorted() == [d.id])
    }

    @Test func arraysMadeByOtherCodeAreFoundByIDToo() {
        var array = RecordArray([Chore(title: "x"), Chore(title: "y")])
        let y = array[1]
        array[recordID: y.recordID]?.title = "y2"
        #expect(array.map(\.title) == ["x", "y2"])
        #expect(array.remove(recordID: y.recordID)?.title == "y2")
        #expect(array.count == 1)
    }
}
