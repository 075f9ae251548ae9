@testable import MagicMirror
import Testing

/// `RecordPositions`, the id index of a mirror's array, on its own: lookups stay right while
/// positions go stale, duplicates fall back to scans, and the log names each touched id once.
@Suite(.timeLimit(.minutes(5))) struct RecordPositionsTests {
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

    /// An id no logged mutation touched yet is found through the index even while another
    /// id has two records (lookups then scan), after swaps and shifts made the index stale,
    /// and not at a position whose record was just renamed to it.
    @Test func anUntouchedIdIsFoundThroughTheIndexWhateverElseHappened() {
        var records = chores(["a", "b", "c", "d"])
        var positions = RecordPositions(indexing: records)
        positions.log = RecordPositions.ChangeLog(session: 1)
        #expect(positions.positionOfUntouched("missing", in: records) == nil)
        records.append(Chore(id: "a", title: "again"))
        positions.noteTouched("a")
        positions.register("a", at: 4)
        #expect(positions.hasDuplicates)
        records.swapAt(1, 3)
        positions.moved(records[1].recordID, to: 1)
        positions.moved(records[3].recordID, to: 3)
        #expect(positions.positionOfUntouched("b", in: records) == 3, "found after a swap, while another id has two records")
        records.insert(Chore(id: "x", title: "x"), at: 0)
        positions.noteTouched("x")
        positions.shifted(from: 0)
        positions.register("x", at: 0)
        #expect(positions.positionOfUntouched("c", in: records) == 3, "a stale entry is repaired")
        // [y, x, a, d, …]: the index still says d is at 2, where `a` is renamed to d.
        records.insert(Chore(id: "y", title: "y"), at: 0)
        positions.noteTouched("y")
        positions.shifted(from: 0)
        positions.register("y", at: 0)
        records[2].id = "d"
        #expect(positions.positionOfUntouched("d", in: records, skipping: 2) == 3)
    }
}
