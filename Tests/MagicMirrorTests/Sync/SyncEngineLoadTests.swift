import Foundation
import Testing

@testable import MagicMirror

/// `SyncEngine.load`: a whole zone becomes the shown records, in creation order whatever
/// order the database lists them in, without tombstones or records that do not decode.
@Suite(.timeLimit(.minutes(5))) struct SyncEngineLoadTests {
    private func loaded(_ order: [Int]) -> [String] {
        let chores = (0..<6).map { Chore(id: "c\($0)", title: "\($0)") }
        let stored = order.map { index in
            StoredRecord(
                id: chores[index].id, version: 1, fields: index == 4 ? nil : Data(),
                modified: HLCTimestamp(millis: 1_000 + Int64(index)), writer: "w")
        }
        var set = ChangeSet(records: stored, token: ChangeToken(generation: 1, sequence: 6), isComplete: true)
        var decoded = DecodedRecords<Chore>(order.map { index in
            index == 4 ? nil : index == 5 ? .failure(CocoaError(.coderReadCorrupt)) : .success(chores[index])
        })
        var engine = SyncEngine<Chore>(
            zone: .public("Chore"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
        engine.load(&set, decoded: &decoded)
        #expect(set.records.isEmpty && decoded.values.isEmpty && decoded.count == 0, "what was taken is let go")
        #expect(engine.reportedUndecodable[chores[5].id]?.version == 1, "the record that did not decode is reported")
        let shown = engine.records.array.map(\.id)
        for id in shown { #expect(engine.records[id]?.id == id) }
        return shown
    }

    @Test func recordsListedInCreationOrderAreShownInIt() {
        #expect(loaded([0, 1, 2, 3, 4, 5]) == ["c0", "c1", "c2", "c3"])
    }

    /// Records listed in creation order, each decoded: the decoded values become the shown
    /// array as they are, not copied (opening a large zone would hold both at its peak).
    @Test func valuesInCreationOrderAreShownWithoutACopy() {
        let chores = (0..<5).map { Chore(id: "c\($0)", title: "\($0)") }
        let stored = chores.enumerated().map { index, chore in
            StoredRecord(
                id: chore.id, version: 1, fields: Data(), modified: HLCTimestamp(millis: 1_000 + Int64(index)),
                writer: "w")
        }
        var set = ChangeSet(records: stored, token: ChangeToken(generation: 1, sequence: 5), isComplete: true)
        var decoded = DecodedRecords<Chore>(chores.map { .success($0) })
        let decodedBuffer = decoded.values.withUnsafeBufferPointer { $0.baseAddress }
        var engine = SyncEngine<Chore>(
            zone: .public("Chore"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
        engine.load(&set, decoded: &decoded)
        #expect(engine.records.array.array == chores)
        #expect(engine.records.array.array.withUnsafeBufferPointer { $0.baseAddress } == decodedBuffer)
    }

    @Test func recordsListedInAnotherOrderAreShownInCreationOrder() {
        #expect(loaded([3, 5, 0, 4, 2, 1]) == ["c0", "c1", "c2", "c3"])
        #expect(loaded([1, 0, 2, 3, 4, 5]) == ["c0", "c1", "c2", "c3"])
        #expect(loaded([0, 1, 2, 3, 5, 4].reversed()) == ["c0", "c1", "c2", "c3"])
    }

    /// A complete set that carries the database's table, its records in creation order: the
    /// mirror's index takes the table's ids as they are, and changing the mirror's array
    /// leaves the table as it was. Where a record is not shown one for one (a failure, an id
    /// decoded with other bytes), the ids are formed from there on.
    @Test func theDatabasesTableOfIDsServesTheIndexUntilARecordIsNotShownOneForOne() throws {
        let chores = (0..<5).map { Chore(id: "c\($0)", title: "\($0)") }
        let stored = chores.map { chore in
            StoredRecord(
                id: chore.id, version: 1, fields: Data(), modified: HLCTimestamp(millis: 1_000 + Int64(chore.rank)),
                writer: "w", created: HLCTimestamp(millis: 1_000 + Int64(chore.id.dropFirst())!))
        }
        let table = try #require(IDMap(ids: stored.map(\.id), values: stored))
        for (name, decodedAs) in [
            ("every record", chores.map { Result<Chore, any Error>.success($0) }),
            ("a failure", chores.enumerated().map { index, chore in
                index == 2 ? .failure(CocoaError(.coderReadCorrupt)) : .success(chore) }),
            ("other id bytes", chores.enumerated().map { index, chore in
                var other = chore
                if index == 3 { other.id = "x3" }
                return .success(other) }),
        ] as [(String, [Result<Chore, any Error>])] {
            var set = ChangeSet(complete: table, token: ChangeToken(generation: 1, sequence: 5))
            var decoded = DecodedRecords(decodedAs.map { Optional($0) })
            var engine = SyncEngine<Chore>(
                zone: .public("Chore"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
            engine.load(&set, decoded: &decoded)
            let expected = decodedAs.compactMap { try? $0.get().id }
            #expect(engine.records.array.map(\.id) == expected, "\(name)")
            for (index, id) in expected.enumerated() {
                #expect(engine.records.array.firstIndex(ofRecordID: id) == index, "\(name): \(id)")
            }
            let number = engine.records.beginEdit()
            var lent = engine.records.lendArray()
            lent.append(Chore(id: "new", title: "new"))
            lent.remove(at: 0)
            let changes = engine.records.endEdit(number, returning: lent)
            #expect(Set(changes.map(\.id)) == ["new", "c0"], "\(name)")
            #expect(engine.records["new"]?.title == "new" && engine.records["c0"] == nil, "\(name)")
            #expect(engine.records.array.firstIndex(ofRecordID: expected[1]) == 0, "\(name)")
            #expect(table.keys == stored.map(\.id), "\(name): the database's table is as it was")
            // The index may share the table's lookup table: the database still finds each of
            // its records, and not the mirror's new one.
            for record in stored { #expect(table[record.id]?.id == record.id, "\(name): \(record.id)") }
            #expect(table["new"] == nil, "\(name)")
            for (index, chore) in engine.records.array.array.enumerated() {
                #expect(engine.records.array.firstIndex(ofRecordID: chore.id) == index, "\(name): \(chore.id)")
            }
        }
    }
}
