import Foundation
import Testing

@testable import MagicMirror

/// Review finding: the min-heap of first sequences only drops the items of gone entries
/// when `oldestSequence()` is asked (a `flush()`), and only down to the first current item.
/// A mirror that never flushes, or one with one change held at the top, keeps one item per
/// change it ever made: memory that grows without bound.
@Suite(.timeLimit(.minutes(5))) struct CommitQueueHeapGrowthTests {
    private func stored(_ id: String, version: Int) -> StoredRecord {
        StoredRecord(id: id, version: version, fields: Data("{}".utf8), modified: HLCTimestamp(millis: Int64(version)), writer: "w")
    }

    private func commitAll(_ queue: inout CommitQueue<Chore>) {
        while case .run(let batch) = queue.next(now: .now), !batch.isEmpty {
            _ = queue.applied(batch, results: batch.map { .applied(stored($0.recordID, version: 1)) })
        }
    }

    @Test func itemsOfCommittedChangesDoNotPileUpWithoutAFlush() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        for sequence in 1...10_000 {
            let id = "r\(sequence % 50)"
            _ = queue.add(id, value: Chore(id: id, title: "\(sequence)"), timestamp: HLCTimestamp(millis: Int64(sequence)),
                          sequence: sequence, stored: nil)
            if sequence % 7 == 0 { commitAll(&queue) }
        }
        commitAll(&queue)
        #expect(queue.isEmpty)
        // Nothing waits: a handful of items at most, not one per change ever made.
        #expect(queue.oldestSequenceItems <= 1_000)
    }

    @Test func itemsBelowAHeldChangeDoNotPileUpWhileFlushing() {
        var queue = CommitQueue<Chore>(maximumBatchSize: 10)
        _ = queue.add("held", value: Chore(id: "held", title: ""), timestamp: HLCTimestamp(millis: 1), sequence: 1, stored: nil)
        queue.hold("held", error: MirrorError(.invalidRecord, "held"))
        for sequence in 2...10_000 {
            let id = "r\(sequence % 50)"
            _ = queue.add(id, value: Chore(id: id, title: "\(sequence)"), timestamp: HLCTimestamp(millis: Int64(sequence)),
                          sequence: sequence, stored: nil)
            if sequence % 7 == 0 {
                commitAll(&queue)
                #expect(queue.oldestSequence() == 1)
            }
        }
        #expect(queue.oldestSequenceItems <= 1_000)
    }
}
