import Foundation
import Testing

@testable import MagicMirror

/// `SyncEngine.load`: a whole zone becomes the shown records, in creation order whatever
/// order the database lists them in, without tombstones or records that do not decode.
@Suite struct SyncEngineLoadTests {
    private func loaded(_ order: [Int]) -> [String] {
        let chores = (0..<6).map { Chore(id: "c\($0)", title: "\($0)") }
        let stored = order.map { index in
            StoredRecord(
                id: chores[index].id, version: 1, fields: index == 4 ? nil : Data(),
                modified: HLCTimestamp(millis: 1_000 + Int64(index)), writer: "w")
        }
        var set = ChangeSet(records: stored, token: ChangeToken(generation: 1, sequence: 6), isComplete: true)
        var decoded: [Result<Chore, any Error>?] = order.map { index in
            index == 4 ? nil : index == 5 ? .failure(CocoaError(.coderReadCorrupt)) : .success(chores[index])
        }
        var engine = SyncEngine<Chore>(
            zone: .public("Chore"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
        engine.load(&set, decoded: &decoded)
        #expect(set.records.isEmpty && decoded.isEmpty, "what was taken is let go")
        let shown = engine.records.array.map(\.id)
        for id in shown { #expect(engine.records[id]?.id == id) }
        return shown
    }

    @Test func recordsListedInCreationOrderAreShownInIt() {
        #expect(loaded([0, 1, 2, 3, 4, 5]) == ["c0", "c1", "c2", "c3"])
    }

    @Test func recordsListedInAnotherOrderAreShownInCreationOrder() {
        #expect(loaded([3, 5, 0, 4, 2, 1]) == ["c0", "c1", "c2", "c3"])
        #expect(loaded([1, 0, 2, 3, 4, 5]) == ["c0", "c1", "c2", "c3"])
        #expect(loaded([0, 1, 2, 3, 5, 4].reversed()) == ["c0", "c1", "c2", "c3"])
    }
}
