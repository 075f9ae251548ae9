import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct ShownRecordsTests {
    private let a = Chore(id: "a", title: "A")
    private let b = Chore(id: "b", title: "B")
    private let c = Chore(id: "c", title: "C")

    private func loaded(_ chores: [Chore]) -> ShownRecords<Chore> {
        var records = ShownRecords<Chore>()
        records.load(chores)
        return records
    }

    /// Runs `edit` on the lent array, as `Mirror.dataModel`'s `_modify` does.
    private func edit(_ records: inout ShownRecords<Chore>, _ edit: (inout RecordArray<Chore>) -> Void) -> [ShownRecords<Chore>.Change] {
        let number = records.beginEdit()
        var lent = records.lendArray()
        let isLent = records.isLent
        #expect(isLent)
        edit(&lent)
        return records.endEdit(number, returning: lent)
    }

    @Test func anEditOfOneFieldIsOneUpdate() {
        var records = loaded([a, b])
        let changes = edit(&records) { $0[1].title = "x" }
        #expect(changes.map(\.id) == ["b"])
        #expect(changes.first?.kind == .updated)
        #expect(changes.first?.old == b)
        #expect(records.array.map(\.title) == ["A", "x"])
        #expect(records["b"]?.title == "x")
        #expect(!records.isLent)
    }

    /// Loading with the ids already formed (the stored records' strings) indexes each record
    /// under its own id, as loading without them does.
    @Test func loadingWithTheirIdsIndexesEachRecordUnderItsOwn() {
        var records = ShownRecords<Chore>()
        records.load([a, b, c], ids: ["a", "b", "c"])
        #expect(records["a"] == a && records["b"] == b && records["c"] == c)
        let changes = edit(&records) { array in
            guard let index = array.firstIndex(ofRecordID: "c") else { return }
            array[index].title = "x"
        }
        #expect(changes.map(\.id) == ["c"])
        #expect(changes.first?.old == c)
        #expect(records.array.map(\.title) == ["A", "B", "x"])
    }

    @Test func anEditThatChangesNothingReportsNothing() {
        var records = loaded([a, b])
        let changes = edit(&records) { $0[0].title = "A" }
        #expect(changes.isEmpty)
    }

    @Test func appendingAnExistingIDReplacesTheRecordInItsPlace() {
        var records = loaded([a, b])
        var newer = a
        newer.title = "A2"
        let changes = edit(&records) { $0.append(newer) }
        #expect(records.array.map(\.title) == ["A2", "B"])
        #expect(changes.map(\.id) == ["a"])
        #expect(changes.first?.kind == .updated)
    }

    @Test func removingIsARemoval() {
        var records = loaded([a, b, c])
        let changes = edit(&records) { $0.remove(at: 1) }
        #expect(changes.map(\.id) == ["b"])
        #expect(changes.first?.kind == .removed)
        #expect(records["b"] == nil)
    }

    @Test func replacingTheWholeArrayComparesEveryRecord() {
        var records = loaded([a, b])
        let changes = records.replaceAll(with: [b, c])
        #expect(Set(changes.map(\.id)) == ["a", "c"])
        #expect(changes.first { $0.id == "a" }?.kind == .removed)
        #expect(changes.first { $0.id == "c" }?.kind == .inserted)
        #expect(records.array.array == [b, c])
    }

    @Test func aRecordFromElsewhereGoesToItsPlaceInTheOrder() {
        var records = loaded([a, c])
        let order = { (id: String) in CreationOrder(created: HLCTimestamp(millis: id == "a" ? 1 : id == "b" ? 2 : 3), id: id) }
        let inserted = records.set("b", b, orderedBy: order)
        #expect(inserted?.kind == .inserted)
        #expect(records.array.map(\.id) == ["a", "b", "c"])
        let repeated = records.set("b", b, orderedBy: order)
        #expect(repeated == nil, "already shown")
        let removed = records.set("a", nil, orderedBy: order)
        #expect(removed?.kind == .removed)
        #expect(records.array.map(\.id) == ["b", "c"])
    }
}
