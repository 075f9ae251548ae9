import Foundation
@testable import MagicMirror
import Testing

/// `RecordArray` behaves like `Array`, keeps its id index right, and logs what each
/// mutation touched.
@Suite(.timeLimit(.minutes(5))) struct RecordArrayTests {
    private static func chores(_ count: Int) -> [Chore] {
        (0..<count).map { Chore(id: "c\($0)", title: "\($0)") }
    }

    /// Applies the same mutation to an `Array` and to a tracked `RecordArray` and compares
    /// them, the index and the log.
    private func check(
        _ name: String, start: Int = 10, expectTouched: Set<String>? = nil,
        _ mutate: (inout RecordArray<Chore>) -> Void, model: (inout [Chore]) -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var expected = Self.chores(start)
        model(&expected)
        var tracked = RecordArray(Self.chores(start))
        tracked.startTracking()
        tracked.beginLog(session: 7)
        mutate(&tracked)
        let log = tracked.endLog(session: 7)
        #expect(tracked.array == expected, "\(name): contents", sourceLocation: sourceLocation)
        for (index, chore) in expected.enumerated() {
            #expect(tracked.firstIndex(ofRecordID: chore.id) == index, "\(name): index of \(chore.id)",
                    sourceLocation: sourceLocation)
            #expect(tracked.position(of: chore.id) == index, sourceLocation: sourceLocation)
        }
        let removed = Set(Self.chores(start).map(\.id)).subtracting(expected.map(\.id))
        for id in removed {
            #expect(tracked.position(of: id) == nil, "\(name): \(id) is gone", sourceLocation: sourceLocation)
        }
        if let expectTouched {
            #expect(log.map { Set($0.touched) } == expectTouched, "\(name): touched", sourceLocation: sourceLocation)
        }
        // The same mutation on an untracked array gives the same contents.
        var plain = RecordArray(Self.chores(start))
        mutate(&plain)
        #expect(plain.array == expected, "\(name): untracked contents", sourceLocation: sourceLocation)
    }

    @Test func mutationsMatchArray() {
        let extra = Chore(id: "x", title: "extra")
        let more = [Chore(id: "y", title: "y"), Chore(id: "z", title: "z")]
        check("append", expectTouched: ["x"], { $0.append(extra) }, model: { $0.append(extra) })
        check("insert at 0", expectTouched: ["x"], { $0.insert(extra, at: 0) }, model: { $0.insert(extra, at: 0) })
        check("insert in the middle", { $0.insert(extra, at: 4) }, model: { $0.insert(extra, at: 4) })
        check("remove(at:)", expectTouched: ["c3"], { $0.remove(at: 3) }, model: { $0.remove(at: 3) })
        check("removeLast", expectTouched: ["c9"], { $0.removeLast() }, model: { $0.removeLast() })
        check("removeFirst", expectTouched: ["c0"], { $0.removeFirst() }, model: { $0.removeFirst() })
        check("removeAll", { $0.removeAll() }, model: { $0.removeAll() })
        check("removeAll(keepingCapacity:)", { $0.removeAll(keepingCapacity: true) },
              model: { $0.removeAll(keepingCapacity: true) })
        check("removeAll(where:)", expectTouched: ["c1", "c3", "c5", "c7", "c9"],
              { $0.removeAll { Int($0.title)! % 2 == 1 } }, model: { $0.removeAll { Int($0.title)! % 2 == 1 } })
        check("edit a field", expectTouched: ["c4"], { $0[4].title = "edited" }, model: { $0[4].title = "edited" })
        check("replace an element", expectTouched: ["c4", "x"], { $0[4] = extra }, model: { $0[4] = extra })
        check("change an id in place", expectTouched: ["c2", "renamed"],
              { $0[2].id = "renamed" }, model: { $0[2].id = "renamed" })
        check("replaceSubrange", { $0.replaceSubrange(2..<5, with: more) },
              model: { $0.replaceSubrange(2..<5, with: more) })
        check("append(contentsOf:)", { $0.append(contentsOf: more) }, model: { $0.append(contentsOf: more) })
        check("+=", { $0 += more }, model: { $0 += more })
        check("insert(contentsOf:)", { $0.insert(contentsOf: more, at: 1) }, model: { $0.insert(contentsOf: more, at: 1) })
        check("removeSubrange", { $0.removeSubrange(1..<8) }, model: { $0.removeSubrange(1..<8) })
        check("swapAt", expectTouched: [], { $0.swapAt(1, 8) }, model: { $0.swapAt(1, 8) })
        check("sort", { $0.sort { $0.id > $1.id } }, model: { $0.sort { $0.id > $1.id } })
        check("reverse", { $0.reverse() }, model: { $0.reverse() })
        check("shuffle by assignment", { $0 = RecordArray($0.reversed()) }, model: { $0.reverse() })
        check("popLast", { _ = $0.popLast() }, model: { _ = $0.popLast() })
        check("many steps", {
            $0.insert(extra, at: 0)
            $0.remove(at: 5)
            $0.append(contentsOf: more)
            $0[3].notes = "n"
            $0.remove(at: 1)
            $0.insert(Chore(id: "w", title: "w"), at: 2)
        }, model: {
            $0.insert(extra, at: 0)
            $0.remove(at: 5)
            $0.append(contentsOf: more)
            $0[3].notes = "n"
            $0.remove(at: 1)
            $0.insert(Chore(id: "w", title: "w"), at: 2)
        })
    }

    @Test func aSecondRecordWithAnIDIsNoticed() {
        var array = RecordArray(Self.chores(3))
        array.startTracking()
        array.beginLog(session: 1)
        array.append(Chore(id: "c1", title: "copy"))
        let log = array.endLog(session: 1)
        #expect(log?.sawDuplicate == true)
        #expect(array.mayHaveDuplicates)
        // Lookups still find a record with that id.
        #expect(array.firstIndex(ofRecordID: "c1") == 1)
    }

    @Test func aLogFromAnotherSessionIsNotReturned() {
        var array = RecordArray(Self.chores(3))
        array.startTracking()
        array.beginLog(session: 1)
        array.append(Chore(id: "x", title: "x"))
        #expect(array.endLog(session: 2) == nil)
        var replaced = RecordArray(Self.chores(3))
        replaced.startTracking()
        replaced.beginLog(session: 3)
        replaced = [Chore(id: "y", title: "y")]
        #expect(replaced.endLog(session: 3) == nil)
    }

    /// What the newcomer tried first: a mirror's array passed where `[Record]` is expected.
    @Test func filteringAndArrayGiveAStandardArray() {
        func titles(_ chores: [Chore]) -> [String] { chores.map(\.title) }
        var records = RecordArray(Self.chores(4))
        records[1].done = true
        #expect(titles(records.filter { !$0.done }) == ["0", "2", "3"])
        #expect(titles(records.array) == ["0", "1", "2", "3"])
        #expect(titles(records.sorted { $0.title > $1.title }) == ["3", "2", "1", "0"])
    }

    @Test func readsLikeAnArray() {
        let array: RecordArray<Chore> = [Chore(id: "a", title: "a"), Chore(id: "b", title: "b")]
        #expect(array.count == 2)
        #expect(array.map(\.id) == ["a", "b"])
        #expect(array.first?.id == "a")
        #expect(array.last?.id == "b")
        #expect(array.firstIndex(ofRecordID: "b") == 1)
        #expect(array.firstIndex(ofRecordID: "nope") == nil)
        #expect(array[0..<1].map(\.id) == ["a"])
        #expect(array == RecordArray(array.array))
        #expect(array.description == array.array.description)
        #expect(RecordArray<Chore>().isEmpty)
    }
}
