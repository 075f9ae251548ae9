import Foundation
import Testing

@testable import MagicMirror

/// `ZoneState.completeChangeSet`: the whole zone as a change set, carrying the state's own
/// table of records when it has no tombstones, so that a mirror opening a large zone keeps
/// that table rather than a copy.
@Suite(.timeLimit(.minutes(5))) struct ZoneStateTests {
    private func stored(_ id: String, version: Int = 1, deleted: Bool = false) -> StoredRecord {
        StoredRecord(
            id: id, version: version, fields: deleted ? nil : Data(#"{"title":"\#(id)"}"#.utf8),
            modified: HLCTimestamp(millis: Int64(version)), writer: "w")
    }

    private func state(_ records: [StoredRecord]) -> ZoneState {
        var state = ZoneState()
        state.apply(records, sequence: 1)
        return state
    }

    @Test func aStartingSnapshotThatListsAnIdTwiceKeepsTheLaterRecord() {
        let state = ZoneState(records: [stored("a"), stored("b"), stored("a", version: 2)])
        #expect(state.records.count == 2)
        #expect(state.records["a"]?.version == 2)
        #expect(state.records["b"]?.version == 1)
    }

    /// Room reserved for a journal's records is what the commits applied after it take: the
    /// table does not double commit by commit past it (to twice what it holds).
    @Test func roomReservedForManyCommitsIsRoomTheyTake() {
        var state = ZoneState()
        state.reserveCapacity(1_000)
        for commit in 0..<10 {
            state.apply((0..<100).map { stored("r\(commit * 100 + $0)") }, sequence: commit + 1)
        }
        #expect(state.records.count == 1_000)
        #expect(state.records.capacity < 1_200, "room for the records, not for twice as many")
    }

    @Test func aCompleteSetWithoutTombstonesCarriesTheStatesTable() throws {
        let state = state([stored("a"), stored("b"), stored("c")])
        let set = state.completeChangeSet
        #expect(set.isComplete)
        #expect(set.token == state.token)
        #expect(Set(set.records.map(\.id)) == ["a", "b", "c"])
        let table = try #require(set.recordsByID)
        #expect(table == state.records)
        #expect(table.sharesStorage(with: state.records), "the state's table, not a copy")
    }

    @Test func aCompleteSetWithTombstonesListsTheLiveRecordsOnly() {
        var state = state([stored("a"), stored("b")])
        state.apply([stored("b", version: 2, deleted: true)], sequence: 2)
        let set = state.completeChangeSet
        #expect(set.records.map(\.id) == ["a"])
        #expect(set.recordsByID == nil, "the table holds a tombstone the set does not list")
    }

    @Test func changingTheRecordsDropsTheTable() {
        let state = state([stored("a"), stored("b")])
        var removed = state.completeChangeSet
        removed.records.removeLast()
        #expect(removed.recordsByID == nil)
        var edited = state.completeChangeSet
        edited.records[0].version = 9
        #expect(edited.recordsByID == nil)
        var unchanged = state.completeChangeSet
        unchanged.token = ChangeToken(generation: 0, sequence: 5)
        #expect(unchanged.recordsByID != nil, "only the records make the table stale")
    }

    @Test func theTableIsNoPartOfEquality() {
        let state = state([stored("a"), stored("b")])
        let carrying = state.completeChangeSet
        let plain = ChangeSet(records: carrying.records, token: carrying.token, isComplete: true)
        #expect(carrying.recordsByID != nil && plain.recordsByID == nil)
        #expect(carrying == plain)
        #expect(carrying.hashValue == plain.hashValue)
    }

    @Test func aLaterCommitLeavesAHandedOutTableAsItWas() throws {
        var state = state([stored("a"), stored("b")])
        let set = state.completeChangeSet
        state.apply([stored("a", version: 2), stored("c")], sequence: 2)
        let table = try #require(set.recordsByID)
        #expect(table.count == 2)
        #expect(table["a"]?.version == 1)
        #expect(!table.sharesStorage(with: state.records), "the state copied its table before changing it")
    }
}
