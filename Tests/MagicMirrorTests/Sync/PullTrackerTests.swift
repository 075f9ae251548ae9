import Foundation
import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct PullTrackerTests {
    private let now = ContinuousClock.now

    private func token(_ sequence: Int, generation: Int = 0) -> ChangeToken {
        ChangeToken(generation: generation, sequence: sequence)
    }

    private func stored(_ id: String, version: Int, deleted: Bool = false, createdAt created: Int64 = 0) -> StoredRecord {
        StoredRecord(
            id: id, version: version, fields: deleted ? nil : Data("{}".utf8),
            modified: HLCTimestamp(millis: Int64(version)), writer: "w", created: HLCTimestamp(millis: created))
    }

    private func loaded(at sequence: Int, _ records: [StoredRecord] = []) -> PullTracker<Chore> {
        var tracker = PullTracker<Chore>()
        tracker.load(ChangeSet(records: records, token: token(sequence), isComplete: true))
        return tracker
    }

    @Test func loadingKeepsTheTableTheSetCarries() throws {
        var state = ZoneState()
        state.apply([stored("a", version: 1), stored("b", version: 2)], sequence: 1)
        let set = state.completeChangeSet
        var tracker = PullTracker<Chore>()
        tracker.load(set)
        let table = try #require(set.recordsByID)
        #expect(tracker.storedRecords.sharesStorage(with: table), "the database's table, not a copy")
        #expect(tracker["b"]?.version == 2)
        #expect(tracker.token == state.token)
        tracker.remember(stored("b", version: 3))
        #expect(tracker["b"]?.version == 3)
        #expect(table["b"]?.version == 2, "the database's table is left as it was")
    }

    @Test func loadingASetWithoutATableIndexesItsRecords() {
        let tracker = loaded(at: 1, [stored("a", version: 1), stored("b", version: 2)])
        #expect(tracker.storedRecords.count == 2)
        #expect(tracker["a"]?.version == 1)
        #expect(tracker["b"]?.version == 2)
    }

    @Test func hintsMoveTheTargetForwardOnly() {
        var tracker = loaded(at: 1)
        let woken = [token(1), token(3), token(2), token(3)].map { tracker.hint($0) }
        #expect(woken == [false, true, false, false], "forward only")
        #expect(tracker.phase == .due(token(3)))
        #expect(tracker.deadline(now: now) == nil, "a pull is due now")
        _ = tracker.begin()
        #expect(tracker.phase == .idle)
    }

    @Test func aContiguousCommitNeedsNoPull() {
        var tracker = loaded(at: 1)
        let contiguous = tracker.committed(upTo: token(2))
        #expect(!contiguous)
        #expect(tracker.token == token(2))
        let skipped = tracker.committed(upTo: token(4))
        #expect(skipped, "another writer committed in between")
        #expect(tracker.phase == .due(token(4)))
    }

    @Test func aCompleteSetIsSetAsideWhenACommitEndedMeanwhile() {
        var tracker = loaded(at: 1)
        let start = tracker.begin()
        _ = tracker.committed(upTo: nil)
        let set = ChangeSet(records: [], token: token(5), isComplete: true)
        let vanished = tracker.startApplying(set, since: start)
        #expect(vanished == nil)
        #expect(tracker.phase == .dueAnyway)
    }

    @Test func aCompleteSetTellsWhichRecordsVanished() {
        var tracker = loaded(at: 2, [stored("a", version: 1), stored("b", version: 1)])
        let start = tracker.begin()
        let set = ChangeSet(records: [stored("b", version: 2)], token: token(1, generation: 1), isComplete: true)
        let vanished = tracker.startApplying(set, since: start)
        #expect(vanished?.map(\.id) == ["a"])
        let newer = tracker.accept(set.records[0], complete: true)
        let older = tracker.accept(stored("b", version: 1), complete: true)
        #expect(newer)
        #expect(!older, "older than what it knows")
        tracker.finishApplying(set)
        #expect(tracker.token == token(1, generation: 1))
        #expect(tracker["a"] == nil)
    }

    @Test func aFailedPullIsRetriedAfterABackoff() {
        var tracker = loaded(at: 1)
        _ = tracker.begin()
        tracker.failed(now: now, configuration: MirrorConfiguration(retryDelay: .seconds(1)))
        let retryAt = now.advanced(by: .seconds(1))
        #expect(tracker.phase == .retrying(at: retryAt))
        let woken = tracker.hint(token(9))
        #expect(!woken, "the retry reads everything anyway")
        #expect(tracker.deadline(now: now) == .some(retryAt))
        #expect(tracker.deadline(now: retryAt) == nil)
    }

    @Test func aHeldBackVersionIsDroppedOnceSuperseded() {
        var tracker = loaded(at: 1, [stored("a", version: 1)])
        _ = tracker.accept(stored("a", version: 2), complete: false)
        tracker.holdBack(stored("a", version: 2), value: .success(Chore(id: "a", title: "remote")))
        tracker.remember(stored("a", version: 3))
        let superseded = tracker.takeHeldBack("a")
        #expect(superseded == nil)

        _ = tracker.accept(stored("a", version: 4), complete: false)
        tracker.holdBack(stored("a", version: 4), value: nil)
        let latest = tracker.takeHeldBack("a")
        let again = tracker.takeHeldBack("a")
        #expect(latest?.record.version == 4)
        #expect(again == nil, "taken once")
    }

    /// Another record under a known id (another creation clock) replaces the known one from
    /// a complete set even with a lower version: a shared zone's record of another owner,
    /// once the first owner's share ended. An incremental set still goes by version.
    @Test func anotherRecordUnderAKnownIdIsTakenFromACompleteSet() {
        var tracker = loaded(at: 1, [stored("t1", version: 3, createdAt: 10)])
        let other = stored("t1", version: 1, createdAt: 20)
        #expect(tracker.recordsToDecode(in: ChangeSet(records: [other], token: token(2), isComplete: false)).isEmpty)
        let fromIncremental = tracker.accept(other, complete: false)
        #expect(!fromIncremental)
        let complete = ChangeSet(records: [other], token: token(2), isComplete: true)
        #expect(tracker.recordsToDecode(in: complete).map(\.version) == [1])
        let fromComplete = tracker.accept(other, complete: true)
        #expect(fromComplete)
        #expect(tracker["t1"]?.created == HLCTimestamp(millis: 20))
        let again = tracker.accept(stored("t1", version: 1, createdAt: 20), complete: true)
        #expect(!again, "the same record again")
    }
}
