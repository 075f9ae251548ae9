@testable import MagicMirror
import Testing

/// `RecordPositions`, the id index of a mirror's array, on its own: lookups stay right while
/// positions go stale, duplicates fall back to scans, and the log names each touched id once.
@Suite struct RecordPositionsTests {
    private func chores(_ ids: [String]) -> [Chore] { ids.map { Chore(id: $0, title: $0) } }

    @Test func anInsertionInTheMiddleIsRepairedOnLookUp() {
        var records = chores(["a", "b", "c"])
        var positions = RecordPositions(indexing: records)
        records.insert(Chore(id: "x", title: "x"), at: 1)
        positions.shifted(from: 1)
        positions.register("x", at: 1)
        #expect(positions.validBelow == 1)
        #expect(positions.lookUp("c", in: records) == 3, "a stale position is checked, then scanned")
        #expect(positions.position(of: "c", in: records) == 3)
        #expect(positions.validBelow == 4, "the lookup repaired the index")
        #expect(positions.positions["b"] == 2)
        #expect(positions.position(of: "missing", in: records) == nil)
    }

    @Test func aDuplicateIdFallsBackToScans() {
        var records = chores(["a", "b"])
        var positions = RecordPositions(indexing: records)
        positions.log = RecordPositions.ChangeLog(session: 1)
        records.append(Chore(id: "a", title: "again"))
        positions.register("a", at: 2)
        #expect(positions.hasDuplicates)
        #expect(positions.log?.sawDuplicate == true)
        #expect(positions.position(of: "a", in: records) == 0, "the first one, as a scan finds it")
        positions.rebuild(indexing: Array(records.prefix(2)))
        #expect(!positions.hasDuplicates)
    }

    @Test func theLogNamesEachTouchedIdOnceInOrder() {
        var positions = RecordPositions(indexing: chores(["a", "b"]))
        positions.noteTouched("ignored: no log yet")
        positions.log = RecordPositions.ChangeLog(session: 7)
        for id in ["b", "a", "b", "c"] { positions.noteTouched(id) }
        #expect(positions.log?.touched == ["b", "a", "c"])
        #expect(positions.log?.session == 7)
    }

    @Test func aSwapMovesBothIds() {
        var records = chores(["a", "b", "c"])
        var positions = RecordPositions(indexing: records)
        records.swapAt(0, 2)
        positions.moved(records[0].recordID, to: 0)
        positions.moved(records[2].recordID, to: 2)
        #expect(positions.positions["c"] == 0)
        #expect(positions.positions["a"] == 2)
        positions.unregister("b")
        #expect(positions.lookUp("b", in: records) == nil)
        positions.removeAll(keepingCapacity: true)
        #expect(positions.positions.isEmpty)
        #expect(positions.validBelow == 0)
    }
}
