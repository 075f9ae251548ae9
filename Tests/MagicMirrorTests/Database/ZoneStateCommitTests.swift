import Foundation
import MagicMirror
import Testing

/// `ZoneState`, the in-memory rules both shipped databases apply: the change log that
/// answers `changes(since:)` and the validation of a commit's operations.
@Suite(.timeLimit(.minutes(5))) struct ZoneStateCommitTests {
    private static let writer = "writer-a"

    private static func record(_ id: String, version: Int, number: Int, deleted: Bool = false) -> StoredRecord {
        StoredRecord(
            id: id, version: version, fields: deleted ? nil : Data("{\"n\":\(number)}".utf8),
            modified: HLCTimestamp(millis: Int64(1_000 + number), counter: 0), writer: writer)
    }

    private static func ids(_ changes: ChangeSet) -> [String] { changes.records.map(\.id) }

    // MARK: changes(since:)

    @Test func aRecordChangedInSeveralCommitsIsListedOnceAtItsLastChange() {
        var state = ZoneState()
        state.apply([Self.record("a", version: 1, number: 1), Self.record("b", version: 1, number: 2)], sequence: 1)
        state.apply([Self.record("c", version: 1, number: 3), Self.record("a", version: 2, number: 4)], sequence: 2)
        state.apply([Self.record("b", version: 2, number: 5)], sequence: 3)
        state.apply([Self.record("d", version: 1, number: 6), Self.record("c", version: 2, number: 7)], sequence: 4)

        let all = state.changes(since: ChangeToken(generation: 0, sequence: 0))
        #expect(!all.isComplete)
        #expect(Self.ids(all) == ["a", "b", "d", "c"])
        // Each with its newest version.
        #expect(all.records.map(\.version) == [2, 2, 1, 2])

        let sinceTwo = state.changes(since: ChangeToken(generation: 0, sequence: 2))
        #expect(Self.ids(sinceTwo) == ["b", "d", "c"])
        #expect(sinceTwo.token == ChangeToken(generation: 0, sequence: 4))
    }

    @Test func oneCommitIsListedInItsOrder() {
        var state = ZoneState()
        state.apply([Self.record("x", version: 1, number: 1)], sequence: 1)
        state.apply(
            [Self.record("c", version: 1, number: 2), Self.record("a", version: 1, number: 3),
             Self.record("x", version: 2, number: 4)],
            sequence: 2)
        let changes = state.changes(since: ChangeToken(generation: 0, sequence: 1))
        #expect(Self.ids(changes) == ["c", "a", "x"])
        #expect(changes.records.last?.version == 2)
        #expect(state.changes(since: ChangeToken(generation: 0, sequence: 2)).records.isEmpty)
    }

    @Test func idsThatAreEquivalentStringsAreDifferentRecords() {
        // Ids that are canonically equivalent strings are different records.
        var state = ZoneState()
        state.apply([Self.record("e\u{301}", version: 1, number: 1)], sequence: 1)
        state.apply([Self.record("\u{e9}", version: 1, number: 2)], sequence: 2)
        state.apply([Self.record("e\u{301}", version: 2, number: 3)], sequence: 3)
        let changes = state.changes(since: ChangeToken(generation: 0, sequence: 0))
        #expect(changes.records.map { Array($0.id.utf8) } == [Array("\u{e9}".utf8), Array("e\u{301}".utf8)])
    }

    @Test func aDeletedRecordIsListedAsItsTombstone() {
        var state = ZoneState()
        state.apply([Self.record("a", version: 1, number: 1), Self.record("b", version: 1, number: 2)], sequence: 1)
        state.apply([Self.record("a", version: 2, number: 3, deleted: true)], sequence: 2)
        state.apply([Self.record("b", version: 2, number: 4)], sequence: 3)
        let changes = state.changes(since: ChangeToken(generation: 0, sequence: 0))
        #expect(Self.ids(changes) == ["a", "b"])
        #expect(changes.records.first?.isDeleted == true)
        #expect(state.liveRecords.map(\.id) == ["b"])
    }

    @Test func aTokenOutsideTheLogGetsEveryLiveRecord() {
        var state = ZoneState()
        state.apply([Self.record("a", version: 1, number: 1), Self.record("b", version: 1, number: 2)], sequence: 1)
        state.apply([Self.record("a", version: 2, number: 3, deleted: true)], sequence: 2)
        state.compact(toGeneration: 1)
        state.apply([Self.record("c", version: 1, number: 4)], sequence: 3)

        let old = state.changes(since: ChangeToken(generation: 0, sequence: 1))
        #expect(old.isComplete)
        #expect(Set(Self.ids(old)) == ["b", "c"])
        let current = state.changes(since: ChangeToken(generation: 1, sequence: 2))
        #expect(!current.isComplete)
        #expect(Self.ids(current) == ["c"])
    }

    @Test func aRecordSavedAgainKeepsItsCreationClock() {
        var state = ZoneState()
        let first = Self.record("a", version: 1, number: 1)
        state.apply([first], sequence: 1)
        state.apply([Self.record("a", version: 2, number: 2)], sequence: 2)
        #expect(state.records["a"]?.created == first.modified)
        state.apply([Self.record("a", version: 3, number: 3, deleted: true)], sequence: 3)
        let recreated = Self.record("a", version: 4, number: 4)
        state.apply([recreated], sequence: 4)
        #expect(state.records["a"]?.created == recreated.modified)
    }

    // MARK: prepare

    /// A state of `count` records, `r0`, `r1`, … at version 1, and a large commit over
    /// them and as many new ones (decided in parallel parts).
    private static func stateAndLargeCommit(stored count: Int) -> (ZoneState, [RecordOperation]) {
        var state = ZoneState()
        state.apply((0..<count).map { record("r\($0)", version: 1, number: $0) }, sequence: 1)
        let operations = (0..<(ZoneState.operationsCheckedInParallel + 100)).map { index -> RecordOperation in
            index.isMultiple(of: 7)
                ? .delete("r\(index)", baseVersion: index < count ? 1 : 0, timestamp: HLCTimestamp(millis: 5_000, counter: UInt32(index)))
                : .save("r\(index)", fields: Data("{\"m\":\(index)}".utf8), baseVersion: index < count ? 1 : 0,
                        timestamp: HLCTimestamp(millis: 5_000, counter: UInt32(index)))
        }
        return (state, operations)
    }

    @Test func aLargeCommitStoresWhatAPlanInOrderStores() throws {
        let (state, operations) = Self.stateAndLargeCommit(stored: 3_000)
        let prepared = try state.prepare(operations, writer: "writer-b").get()
        guard case .apply(let planned) = CommitPlan(operations, writer: "writer-b", stored: { state.records[$0] }) else {
            Issue.record("the plan in order refused the commit")
            return
        }
        #expect(prepared == planned)
        #expect(prepared[1]?.version == 2)
        #expect(prepared[1]?.created == Self.record("r1", version: 1, number: 1).modified)
        #expect(prepared[3_500]?.version == 1)
        #expect(prepared[3_500]?.created == operations[3_500].timestamp)
    }

    @Test(arguments: [10, 4_150])
    func aConflictAnywhereInALargeCommitRefusesItWhole(at index: Int) throws {
        let (state, large) = Self.stateAndLargeCommit(stored: 3_000)
        var operations = large
        operations[index] = .save(
            "r\(index)", fields: Data("{}".utf8), baseVersion: 4, timestamp: HLCTimestamp(millis: 6_000))
        guard case .failure(let conflict) = state.prepare(operations, writer: "writer-b") else {
            Issue.record("a commit with a conflict was prepared")
            return
        }
        #expect(conflict.outcome.results.count == operations.count)
        #expect(conflict.outcome.results[index] == .conflict(current: state.records["r\(index)"]))
        #expect(conflict.outcome.results.filter { $0 == .notApplied }.count == operations.count - 1)
    }

    @Test func aRetryInALargeCommitStoresNothingForIt() throws {
        let (state, operations) = Self.stateAndLargeCommit(stored: 3_000)
        var retried = operations
        retried[8] = .save(
            "r8", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_008, counter: 0))
        let prepared = try state.prepare(retried, writer: Self.writer).get()
        #expect(prepared[8] == nil)
        #expect(prepared.filter { $0 == nil }.count == 1)
        #expect(prepared[9]?.version == 2)
    }

    // MARK: validate

    /// A commit large enough that its operations are first checked in parallel parts.
    private static func largeCommit() -> [RecordOperation] {
        (0..<(ZoneState.operationsCheckedInParallel + 100)).map { index in
            .save("r\(index)", fields: Data("{\"n\":\(index)}".utf8), baseVersion: 0,
                  timestamp: HLCTimestamp(millis: 1_000, counter: UInt32(index)))
        }
    }

    /// The error `validate` throws for `operations`, or `nil`.
    private static func validationError(_ operations: [RecordOperation]) -> MirrorError? {
        do {
            try ZoneState.validate(operations, zone: .public("Item"))
            return nil
        } catch {
            return error
        }
    }

    @Test func aLargeValidCommitPasses() {
        let found = Self.validationError(Self.largeCommit())
        #expect(found == nil)
    }

    @Test(arguments: [1, ZoneState.operationsCheckedInParallel - 1, ZoneState.operationsCheckedInParallel + 99])
    func aBadRecordIDAnywhereInALargeCommitIsRefused(at index: Int) throws {
        var operations = Self.largeCommit()
        operations[index] = .delete("a/b", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        let found = Self.validationError(operations)
        let error = try #require(found)
        #expect(error.kind == .invalidName)
        #expect(error.recordIDs == ["a/b"])
        #expect(error.nothingStored)
    }

    @Test(arguments: ["[1]", "{\"n\":", "{} {}", ""])
    func fieldsThatAreNotOneObjectAreRefusedInALargeCommit(fields: String) throws {
        var operations = Self.largeCommit()
        let index = operations.count - 7
        operations[index] = .save(
            "late", fields: Data(fields.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 2_000))
        let found = Self.validationError(operations)
        let error = try #require(found)
        #expect(error.kind == .invalidRecord)
        #expect(error.recordIDs == ["late"])
        #expect(error.message.contains("not a JSON object"))
    }

    @Test func theFirstProblemInOrderIsTheOneReported() throws {
        // A repeated id before a bad one: the repeat.
        var operations = Self.largeCommit()
        operations[3000] = .delete("r10", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        operations[4000] = .save("bad", fields: Data("[]".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 2_000))
        var found = Self.validationError(operations)
        var error = try #require(found)
        #expect(error.recordIDs == ["r10"])
        #expect(error.message.contains("more than once"))

        // A bad id before a repeat: the bad id.
        operations = Self.largeCommit()
        operations[20] = .delete("..", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        operations[30] = .delete("r1", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        found = Self.validationError(operations)
        error = try #require(found)
        #expect(error.kind == .invalidName)
        #expect(error.recordIDs == [".."])

        // An id repeated at the first operation that fails on its own: the repeat, as a
        // check in order meets it before the fields.
        operations = Self.largeCommit()
        operations[50] = .save("r5", fields: Data("1".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 2_000))
        found = Self.validationError(operations)
        error = try #require(found)
        #expect(error.recordIDs == ["r5"])
        #expect(error.message.contains("more than once"))
    }

    @Test func aRepeatedIDAnywhereInALargeCommitIsRefused() throws {
        var operations = Self.largeCommit()
        let last = operations.count - 1
        operations[last] = .delete("r0", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        let found = Self.validationError(operations)
        let error = try #require(found)
        #expect(error.kind == .invalidRecord)
        #expect(error.recordIDs == ["r0"])
        #expect(error.message.contains("more than once"))
        #expect(error.nothingStored)
    }

    @Test func idsThatAreEquivalentStringsAreNotRepeatsInALargeCommit() {
        var operations = Self.largeCommit()
        operations[1] = .delete("e\u{301}", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        operations[operations.count - 2] = .delete("\u{e9}", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        let found = Self.validationError(operations)
        #expect(found == nil)
    }

    @Test(arguments: ["", ".", "..", "a\u{0}b", "x/", String(repeating: "i", count: 256)])
    func invalidRecordIDsAreRefused(id: String) throws {
        let error = try #require(Self.validationError([
            .delete(id, baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))]))
        #expect(error.kind == .invalidName)
        #expect(NameRules.problem(with: id) != nil)
    }

    @Test func nameRulesTellWhichByteIsRefused() {
        #expect(NameRules.problem(with: "a/b") == "contains '/'")
        #expect(NameRules.problem(with: "a\u{0}b") == "contains a NUL byte")
        #expect(NameRules.problem(with: "\u{0}/") == "contains '/'")
        #expect(NameRules.problem(with: "...") == nil)
        #expect(NameRules.problem(with: "é/") == "contains '/'")
    }
}
