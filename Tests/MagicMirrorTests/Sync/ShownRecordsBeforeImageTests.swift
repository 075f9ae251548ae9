import Testing

@testable import MagicMirror

/// `ShownRecords` keeps no second copy of the records: an in-place edit is compared with the
/// before-images its log captured, each the record an id named before the edit. These cases
/// are the ones easy to get wrong: an id touched twice, an id that moves, two records with one
/// id, an array replaced as a whole.
@Suite(.timeLimit(.minutes(5))) struct ShownRecordsBeforeImageTests {
    private static let a = Chore(id: "a", title: "A")
    private static let b = Chore(id: "b", title: "B")
    private static let c = Chore(id: "c", title: "C")
    private static let d = Chore(id: "d", title: "D")
    private static let start = [a, b, c, d]

    private static func chore(_ id: String, _ title: String) -> Chore { Chore(id: id, title: title) }

    /// Loads `start`, runs `edit` on the lent array as `Mirror.dataModel`'s `_modify` does,
    /// and checks that the changes are exactly the records whose value differs between
    /// `start` and the array after the edit, each with its value before and after. Returns
    /// the changes and the array after.
    @discardableResult
    private func expectChangesAreTheDifference(
        _ name: String, _ edit: (inout RecordArray<Chore>) -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> (changes: [ShownRecords<Chore>.Change], after: [Chore]) {
        var records = ShownRecords<Chore>()
        records.load(Self.start)
        let number = records.beginEdit()
        var lent = records.lendArray()
        edit(&lent)
        let changes = records.endEdit(number, returning: lent)
        let after = records.array.array

        let afterIDs = after.map(\.id)
        #expect(Set(afterIDs).count == afterIDs.count, "\(name): one record per id", sourceLocation: sourceLocation)
        let before = Dictionary(uniqueKeysWithValues: Self.start.map { ($0.id, $0) })
        let now = Dictionary(after.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var expected: [String: (old: Chore?, new: Chore?)] = [:]
        for id in Set(before.keys).union(now.keys) where before[id] != now[id] {
            expected[id] = (before[id], now[id])
        }
        let reported = changes.map(\.id)
        #expect(Set(reported).count == reported.count, "\(name): each id once: \(reported)", sourceLocation: sourceLocation)
        #expect(Set(reported) == Set(expected.keys), "\(name): the changed ids", sourceLocation: sourceLocation)
        for change in changes {
            #expect(change.old == expected[change.id]?.old, "\(name): \(change.id)'s value before", sourceLocation: sourceLocation)
            #expect(change.new == expected[change.id]?.new, "\(name): \(change.id)'s value after", sourceLocation: sourceLocation)
            #expect(records[change.id] == change.new, "\(name): \(change.id) as shown", sourceLocation: sourceLocation)
        }
        return (changes, after)
    }

    @Test func aChangeUndoneInTheSameEditIsNoChange() {
        let field = expectChangesAreTheDifference("a field changed and changed back") {
            $0[1].title = "x"
            $0[1].title = "B"
        }
        #expect(field.changes.isEmpty)
        let record = expectChangesAreTheDifference("a record replaced and put back") {
            $0[1] = Self.chore("b", "x")
            $0[1] = Self.b
        }
        #expect(record.changes.isEmpty)
        let removed = expectChangesAreTheDifference("removed, then appended as it was") {
            let removed = $0.remove(at: 1)
            $0.append(removed)
        }
        #expect(removed.changes.isEmpty)
        #expect(removed.after.map(\.id) == ["a", "c", "d", "b"], "it moved, unchanged")
    }

    @Test func reorderingChangesNoRecord() {
        for (name, reorder) in [
            ("swapAt", { (array: inout RecordArray<Chore>) in array.swapAt(0, 3) }),
            ("sort", { $0.sort { $0.id > $1.id } }),
            ("reverse", { $0.reverse() }),
            ("shuffle", { $0.shuffle() }),
            ("partition", { _ = $0.partition { $0.id < "c" } }),
            ("move by remove and insert", { $0.insert($0.remove(at: 0), at: 2) }),
        ] as [(String, (inout RecordArray<Chore>) -> Void)] {
            let reordered = expectChangesAreTheDifference(name, reorder)
            #expect(reordered.changes.isEmpty, "\(name)")
            #expect(Set(reordered.after.map(\.id)) == ["a", "b", "c", "d"], "\(name)")
        }
    }

    @Test func anIDChangedInPlaceIsARemovalAndAnInsertion() {
        let renamed = expectChangesAreTheDifference("a new id") { $0[1].id = "z" }
        #expect(Set(renamed.changes.map(\.kind)) == [.removed, .inserted])
        #expect(renamed.changes.first { $0.id == "b" }?.old == Self.b)
        #expect(renamed.after.map(\.id) == ["a", "z", "c", "d"])
    }

    /// An id changed in place to one the array holds: the record that id named before is its
    /// before-image, not the renamed record (which is at the position the index may still
    /// give for the id, once an insertion made the index stale).
    @Test func anIDChangedInPlaceToAnotherRecordsIDReplacesThatRecord() {
        let onto = expectChangesAreTheDifference("onto a held id") { $0[0].id = "c" }
        #expect(onto.changes.first { $0.id == "c" }?.old == Self.c)
        #expect(onto.changes.first { $0.id == "c" }?.new == Self.chore("c", "A"))
        #expect(onto.after.map(\.title) == ["B", "A", "D"], "the renamed record, in c's place")

        let stale = expectChangesAreTheDifference("onto a held id, with a stale index") {
            $0.insert(Self.chore("x", "X"), at: 0)
            $0[2].id = "c"
        }
        #expect(stale.changes.first { $0.id == "c" }?.old == Self.c)
        #expect(stale.changes.first { $0.id == "b" }?.kind == .removed)
        #expect(stale.after.map(\.title) == ["X", "A", "B", "D"])
    }

    @Test func removingAndAddingAnIDAgainComparesWithItsValueBeforeTheEdit() {
        let changed = expectChangesAreTheDifference("removed, then appended changed") {
            $0.remove(at: 0)
            $0.append(Self.chore("a", "A2"))
        }
        #expect(changed.changes.map(\.kind) == [.updated])
        #expect(changed.changes.first?.old == Self.a)
        let twice = expectChangesAreTheDifference("removed twice, added back between") {
            $0.removeAll { $0.id == "b" }
            $0.insert(Self.chore("b", "B2"), at: 0)
            $0.remove(at: 0)
        }
        #expect(twice.changes.map(\.kind) == [.removed])
        #expect(twice.changes.first?.old == Self.b)
        let new = expectChangesAreTheDifference("new, then removed") {
            $0.append(Self.chore("n", "N"))
            $0.removeLast()
        }
        #expect(new.changes.isEmpty)
    }

    @Test func addingAnIDHeldElsewhereReplacesThatRecordInItsPlace() {
        let inserted = expectChangesAreTheDifference("inserted at the front") {
            $0.insert(Self.chore("c", "C2"), at: 0)
        }
        #expect(inserted.after.map(\.title) == ["A", "B", "C2", "D"])
        #expect(inserted.changes.map(\.kind) == [.updated])
        #expect(inserted.changes.first?.old == Self.c)
        let appended = expectChangesAreTheDifference("appended, then the copy edited") {
            $0.append(Self.chore("a", "A2"))
            $0[4].title = "A3"
        }
        #expect(appended.after.map(\.title) == ["A3", "B", "C", "D"])
        #expect(appended.changes.first?.old == Self.a)
        let same = expectChangesAreTheDifference("appended as it was") { $0.append(Self.b) }
        #expect(same.changes.isEmpty)
        #expect(same.after.map(\.id) == ["a", "b", "c", "d"])
    }

    /// Every way of mutating the array reports exactly the records it changed, each with its
    /// value before the edit.
    @Test func everyMutationReportsEachChangedRecordWithItsValueBefore() {
        let x = Self.chore("x", "X")
        let cases: [(String, (inout RecordArray<Chore>) -> Void)] = [
            ("subscript set", { $0[2] = Self.chore("c", "C2") }),
            ("subscript set to another id", { $0[2] = x }),
            ("a field", { $0[3].done = true }),
            ("append", { $0.append(x) }),
            ("append(contentsOf:)", { $0 += [x, Self.chore("y", "Y"), Self.chore("d", "D2")] }),
            ("insert", { $0.insert(x, at: 1) }),
            ("insert(contentsOf:)", { $0.insert(contentsOf: [x, Self.chore("b", "B2")], at: 1) }),
            ("replaceSubrange", { $0.replaceSubrange(1..<3, with: [x, Self.chore("d", "D2")]) }),
            ("remove(at:)", { $0.remove(at: 2) }),
            ("removeFirst, removeLast, popLast", {
                $0.removeFirst()
                $0.removeLast()
                _ = $0.popLast()
            }),
            ("removeSubrange", { $0.removeSubrange(0..<2) }),
            ("removeAll(where:)", { $0.removeAll { $0.id != "c" } }),
            ("removeAll", { $0.removeAll() }),
            ("removeAll, then one back", {
                $0.removeAll(keepingCapacity: true)
                $0.append(Self.chore("b", "B2"))
            }),
            ("by id", {
                $0[recordID: "a"]?.title = "A2"
                $0[recordID: "b"] = nil
                $0[recordID: "x"] = x
                $0.remove(recordID: "c")
            }),
            ("an edit after a shift", {
                $0.insert(x, at: 0)
                $0[3].notes = "n"
                $0.swapAt(0, 4)
                $0[recordID: "d"]?.rank = 2
            }),
            ("sorted while edited", {
                $0[0].rank = 9
                $0.sort { $0.rank > $1.rank || ($0.rank == $1.rank && $0.id > $1.id) }
                $0[1].title = "second"
            }),
        ]
        for (name, mutation) in cases {
            let result = expectChangesAreTheDifference(name, mutation)
            #expect(!result.changes.isEmpty, "\(name) changes something")
        }
    }

    @Test func replacingTheLentArrayComparesWithTheRecordsBeforeTheEdit() {
        let replaced = expectChangesAreTheDifference("assigned") { $0 = [Self.b, Self.chore("c", "C2"), Self.chore("x", "X")] }
        #expect(replaced.after.map(\.title) == ["B", "C2", "X"])
        #expect(Set(replaced.changes.map(\.id)) == ["a", "c", "d", "x"])

        expectChangesAreTheDifference("mutated, then assigned") {
            $0[0].title = "edited"
            $0.append(Self.chore("x", "X"))
            $0.remove(at: 1)
            $0.insert(Self.chore("c", "C2"), at: 0)
            $0 = [Self.chore("a", "A2"), Self.b, Self.chore("y", "Y")]
        }
        let swapped = expectChangesAreTheDifference("swapped with another array") {
            $0[3].title = "D2"
            var other: RecordArray<Chore> = [Self.chore("x", "X"), Self.d]
            swap(&$0, &other)
        }
        #expect(swapped.after.map(\.id) == ["x", "d"])
        #expect(swapped.changes.first { $0.id == "d" } == nil, "d is as it was before the edit")

        let restored = expectChangesAreTheDifference("a copy of itself put back") {
            let copy = $0
            $0.append(Self.chore("x", "X"))
            $0.remove(at: 0)
            $0 = copy
        }
        #expect(restored.changes.isEmpty)
        let copyEdited = expectChangesAreTheDifference("an edited copy put back") {
            $0[1].title = "B2"
            var copy = $0
            copy.remove(at: 0)
            $0.append(Self.chore("x", "X"))
            $0 = copy
        }
        #expect(Set(copyEdited.changes.map(\.id)) == ["a", "b"])
    }

    /// A lent array is changed in place: the copy it leaves with the mirror does not make
    /// its first mutation copy the records (which would make an edit of one record take time
    /// in proportion to all of them).
    @Test func aLentArrayIsMutatedInPlace() {
        var records = ShownRecords<Chore>()
        records.load((0..<1000).map { Self.chore("r\($0)", "\($0)") })
        func address(_ array: RecordArray<Chore>) -> UnsafeRawPointer? {
            array.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
        }
        let shown = address(records.array)
        let number = records.beginEdit()
        var lent = records.lendArray()
        lent[500].title = "edited"
        lent.swapAt(1, 2)
        lent.remove(at: 999)
        #expect(address(lent) == shown, "the records were copied")
        let changes = records.endEdit(number, returning: lent)
        #expect(Set(changes.map(\.id)) == ["r500", "r999"])
        #expect(address(records.array) == shown)
    }

    /// What a lent array leaves with the mirror: the copy kept last, until the mirror ends
    /// the edit; nothing after, whatever a copy of the array that outlived the edit does.
    @Test func aLentArrayCopyKeepsTheLastCopyUntilClosed() {
        let copy = LentArrayCopy<Chore>()
        let first = LentArrayCopy<Chore>.Kept(elements: [Self.a], touched: [], before: [])
        let second = LentArrayCopy<Chore>.Kept(elements: [Self.b], touched: [], before: [])
        copy.keep(first)
        copy.takeBack()
        copy.keep(second)
        #expect(copy.close()?.elements == [Self.b])
        copy.keep(first)
        #expect(copy.close() == nil, "closed: nothing is kept any more")

        var records = ShownRecords<Chore>()
        records.load(Self.start)
        let number = records.beginEdit()
        let lent = records.lendArray()
        var escaped = lent
        _ = records.endEdit(number, returning: lent)
        escaped.append(Self.chore("x", "X"))
        #expect(records.array.map(\.id) == ["a", "b", "c", "d"])
    }
}
