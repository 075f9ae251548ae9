import Foundation
import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct CommitQueueTests {
    private let now = ContinuousClock.now

    private func chore(_ id: String, _ title: String = "") -> Chore { Chore(id: id, title: title) }

    private func stored(_ id: String, version: Int) -> StoredRecord {
        StoredRecord(id: id, version: version, fields: Data("{}".utf8), modified: HLCTimestamp(millis: Int64(version)), writer: "w")
    }

    /// Adds a local change, numbered one past the newest the queue holds.
    private func add(_ queue: inout CommitQueue<Chore>, _ id: String, _ value: Chore?, stored: StoredRecord? = nil) -> Bool {
        let sequence = (queue.pending.values.map(\.lastSequence) + queue.inFlight.values.map(\.lastSequence)).max().map { $0 + 1 } ?? 1
        return queue.add(id, value: value, timestamp: HLCTimestamp(millis: Int64(sequence)), sequence: sequence, stored: stored)
    }

    private func sent(_ step: WorkerStep<[PendingEntry<Chore>]>) -> [PendingEntry<Chore>] {
        if case .run(let batch) = step { return batch }
        return []
    }

    private func applied(_ batch: [PendingEntry<Chore>]) -> [CommitOutcome.Result] {
        batch.map { .applied(stored($0.recordID, version: $0.baseVersion + 1)) }
    }

    /// The oldest sequence by visiting every entry, as the queue once computed it.
    private func oldestByVisiting(_ queue: CommitQueue<Chore>) -> Int? {
        (queue.pending.values.map(\.firstSequence) + queue.inFlight.values.map(\.firstSequence)).min()
    }

    /// The oldest sequence stays right through every way entries come and go: sent,
    /// applied, conflicted, failed (cancelled, transient, permanent), dropped, held,
    /// retried, not encoded.
    @Test(arguments: 1...4)
    func theOldestSequenceIsTheOldestOfTheEntriesLeft(seed: UInt64) {
        var queue = CommitQueue<Chore>(maximumBatchSize: 3)
        var random = seed
        func next(_ bound: Int) -> Int {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((random >> 33) % UInt64(bound))
        }
        var sequence = 0
        var inFlight: [PendingEntry<Chore>] = []
        let ids = (0..<6).map { "r\($0)" }
        var mismatches = 0
        for _ in 0..<2_000 {
            switch next(10) {
            case 0, 1, 2:
                sequence += 1
                let id = ids[next(ids.count)]
                _ = queue.add(
                    id, value: next(5) == 0 ? nil : chore(id, "\(sequence)"),
                    timestamp: HLCTimestamp(millis: Int64(sequence)), sequence: sequence, stored: nil)
            case 3:
                if inFlight.isEmpty { inFlight = sent(queue.next(now: now)) }
            case 4:
                if !inFlight.isEmpty { _ = queue.applied(inFlight, results: applied(inFlight)); inFlight = [] }
            case 5:
                if !inFlight.isEmpty {
                    _ = queue.conflicted(inFlight, results: inFlight.map { .conflict(current: stored($0.recordID, version: 9)) })
                    inFlight = []
                }
            case 6:
                if !inFlight.isEmpty {
                    let kind: MirrorError.Kind = [.cancelled, .ioFailure, .invalidRecord][next(3)]
                    _ = queue.failed(
                        inFlight, error: MirrorError(kind, "failed"), blamed: next(2) == 0 ? [] : [inFlight[0].recordID],
                        now: now, configuration: MirrorConfiguration())
                    inFlight = []
                }
            case 7:
                let id = ids[next(ids.count)]
                if next(2) == 0, queue.inFlight[id] == nil { queue.drop(id) } else { queue.hold(id, error: MirrorError(.ioFailure, "held")) }
            case 8:
                queue.retryHeld(upTo: sequence)
            default:
                if !inFlight.isEmpty {
                    queue.encodingFailed(inFlight.map { ($0, MirrorError(.invalidRecord, "not encoded")) })
                    inFlight = []
                }
            }
            if queue.oldestSequence() != oldestByVisiting(queue) { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }

    @Test func changesToOneRecordFoldIntoOneEntry() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = add(&queue, "a", chore("a", "1"))
        _ = add(&queue, "a", chore("a", "2"))
        let batch = sent(queue.next(now: now))
        #expect(batch.map(\.value?.title) == ["2"])
        #expect(batch.first?.firstSequence == 1 && batch.first?.lastSequence == 2)
        #expect(queue.pendingChanges.map(\.isCommitting) == [true])
    }

    @Test func batchesHoldAtMostTheMaximum() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 2)
        for id in ["a", "b", "c"] { _ = add(&queue, id, chore(id)) }
        let first = sent(queue.next(now: now))
        #expect(first.map(\.recordID) == ["a", "b"])
        guard case .wait(until: nil) = queue.next(now: now) else {
            Issue.record("one batch at a time")
            return
        }
        _ = queue.applied(first, results: applied(first))
        let last = sent(queue.next(now: now))
        #expect(last.map(\.recordID) == ["c"])
    }

    @Test func aCreationRemovedBeforeItIsSentIsDropped() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = add(&queue, "a", chore("a"))
        let kept = add(&queue, "a", nil)
        #expect(!kept)
        #expect(queue.isEmpty)
    }

    @Test func aChangeMadeDuringTheCommitIsBasedOnItsOutcome() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = add(&queue, "a", chore("a", "1"))
        let first = sent(queue.next(now: now))
        _ = add(&queue, "a", chore("a", "2"))
        #expect(queue.waiting("a")?.awaitsCommitInFlight == true)
        guard case .wait = queue.next(now: now) else {
            Issue.record("the second change waits for the first's outcome")
            return
        }
        _ = queue.applied(first, results: [.applied(stored("a", version: 1))])
        let second = sent(queue.next(now: now))
        #expect(second.map(\.baseVersion) == [1])
        #expect(second.map(\.value?.title) == ["2"])
    }

    /// An outcome with fewer results than the batch has operations (a database that
    /// answered for some only) leaves the others to be sent again, first; with a result for
    /// each, nothing is left in flight.
    @Test func entriesWithoutAResultAreSentAgainFirst() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 3)
        for id in ["a", "b", "c", "d"] { _ = add(&queue, id, chore(id)) }
        let batch = sent(queue.next(now: now))
        #expect(batch.map(\.recordID) == ["a", "b", "c"])
        let stored = queue.applied(batch, results: [.applied(stored("a", version: 1))])
        #expect(stored.map(\.1.id) == ["a"])
        #expect(queue.inFlight.isEmpty)
        let again = sent(queue.next(now: now))
        #expect(again.map(\.recordID) == ["b", "c", "d"])
        _ = queue.applied(again, results: applied(again))
        #expect(queue.inFlight.isEmpty && queue.isEmpty)
    }

    @Test func aTransientFailureIsRetriedAfterABackoff() {
        let configuration = MirrorConfiguration(retryDelay: .seconds(1), maximumRetryDelay: .seconds(4))
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = add(&queue, "a", chore("a"))
        let batch = sent(queue.next(now: now))
        let error = MirrorError(.ioFailure, "disk")
        let handling = queue.failed(batch, error: error, blamed: [], now: now, configuration: configuration)
        #expect(handling == .retrying(oldest: 1))
        guard case .wait(until: let deadline?) = queue.next(now: now) else {
            Issue.record("waits for the retry")
            return
        }
        #expect(deadline == now.advanced(by: .seconds(1)))
        let again = sent(queue.next(now: deadline))
        #expect(again.first?.failedAttempts == 1)
        // The second failure in a row waits twice as long.
        _ = queue.failed(again, error: error, blamed: [], now: deadline, configuration: configuration)
        #expect(queue.backoff.retryAt == deadline.advanced(by: .seconds(2)))
    }

    @Test func aBatchThatFailsWithoutNamingItsBadChangeIsSentOneByOne() {
        let configuration = MirrorConfiguration()
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        for id in ["a", "b", "c"] { _ = add(&queue, id, chore(id)) }
        let batch = sent(queue.next(now: now))
        let bad = MirrorError(.invalidRecord, "one of them is bad")
        let handling = queue.failed(batch, error: bad, blamed: [], now: now, configuration: configuration)
        #expect(handling == .isolating)
        #expect(queue.batchSize == .isolating(remaining: 3))
        let one = sent(queue.next(now: now))
        #expect(one.map(\.recordID) == ["a"])
        _ = queue.applied(one, results: applied(one))
        let bOnly = sent(queue.next(now: now))
        #expect(bOnly.map(\.recordID) == ["b"])
        let found = queue.failed(bOnly, error: bad, blamed: [], now: now, configuration: configuration)
        #expect(found == .held(oldest: 2))
        #expect(queue.waiting("b")?.isOnHold == true)
        let cOnly = sent(queue.next(now: now))
        #expect(cOnly.map(\.recordID) == ["c"])
        _ = queue.applied(cOnly, results: applied(cOnly))
        // Two successes of three: still one at a time until the third.
        #expect(queue.batchSize == .isolating(remaining: 1))
    }

    @Test func aChangeOnHoldIsSentAgainWhenAFlushAsks() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = add(&queue, "a", chore("a"))
        let batch = sent(queue.next(now: now))
        let bad = MirrorError(.invalidRecord, "refused", recordIDs: ["a"])
        _ = queue.failed(batch, error: bad, blamed: ["a"], now: now, configuration: MirrorConfiguration())
        guard case .wait(until: nil) = queue.next(now: now) else {
            Issue.record("a change on hold is not sent by itself")
            return
        }
        queue.retryHeld(upTo: 1)
        let again = sent(queue.next(now: now))
        #expect(again.map(\.recordID) == ["a"])
    }

    @Test func anOutcomeWithFewerResultsSendsTheRestAgain() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        for id in ["a", "b"] { _ = add(&queue, id, chore(id)) }
        let batch = sent(queue.next(now: now))
        let stored = queue.applied(batch, results: [.applied(stored("a", version: 1))])
        #expect(stored.map(\.0.recordID) == ["a"])
        let again = sent(queue.next(now: now))
        #expect(again.map(\.recordID) == ["b"])
        #expect(again.first?.earlierTimestamps.count == 1, "it may have been stored")
    }
}
