import Foundation
@testable import MagicMirror
import Testing

/// Attacks on a large commit (decided in parallel parts from
/// `ZoneState.operationsCheckedInParallel` operations) through a real JSON-file database: it
/// stores what the same operations committed in small commits, in order, store (also read
/// back from disk), a retry of it stores nothing more, and a conflict anywhere refuses it whole
/// and stores nothing.
@Suite(.timeLimit(.minutes(5))) struct ZoneStateLargeCommitTests {
    let zone = ZoneID.public("Chore")
    static let size = ZoneState.operationsCheckedInParallel + 300
    static let stored = 2_500

    /// The records `stored` leaves, writer left out (each database has its own), by id.
    static func comparable(_ records: [StoredRecord]) -> [String: StoredRecord] {
        Dictionary(uniqueKeysWithValues: records.map { record in
            var record = record
            record.writer = ""
            return (record.id, record)
        })
    }

    /// `stored` records in small commits, then the large commit's operations: over them,
    /// saves (every fifth deletes) and new records.
    static func operations() -> (setup: [[RecordOperation]], large: [RecordOperation]) {
        let setup = stride(from: 0, to: stored, by: 500).map { start in
            (start..<(start + 500)).map { index in
                RecordOperation.save(
                    "r\(index)", fields: Data("{\"n\":\(index)}".utf8), baseVersion: 0,
                    timestamp: HLCTimestamp(millis: 1_000 + Int64(index)))
            }
        }
        let large = (0..<size).map { index -> RecordOperation in
            let base = index < stored ? 1 : 0
            let timestamp = HLCTimestamp(millis: 900_000, counter: UInt32(index))
            return index.isMultiple(of: 5) && index < stored
                ? .delete("r\(index)", baseVersion: base, timestamp: timestamp)
                : .save("r\(index)", fields: Data("{\"m\":\(index)}".utf8), baseVersion: base, timestamp: timestamp)
        }
        return (setup, large)
    }

    @Test func aLargeCommitStoresWhatSmallCommitsInOrderStoreAndARetryStoresNothingMore() async throws {
        let directory = try TemporaryDirectory("review8-large")
        defer { directory.remove() }
        let (setup, large) = Self.operations()
        let whole = try JSONFileDatabase(directory: directory.url.appendingPathComponent("whole"))
        let small = try JSONFileDatabase(directory: directory.url.appendingPathComponent("small"))
        for database in [whole, small] {
            for commit in setup { #expect(try await database.commit(commit, to: zone).isApplied) }
        }
        let outcome = try await whole.commit(large, to: zone)
        #expect(outcome.isApplied)
        var inOrder: [CommitOutcome.Result] = []
        for start in stride(from: 0, to: large.count, by: 700) {
            let part = try await small.commit(Array(large[start..<min(start + 700, large.count)]), to: zone)
            inOrder += part.results
        }
        func withoutWriter(_ results: [CommitOutcome.Result]) -> [StoredRecord?] {
            results.map { if case .applied(var record) = $0 { record.writer = ""; return record } else { return nil } }
        }
        #expect(withoutWriter(outcome.results) == withoutWriter(inOrder))
        let expected = Self.comparable(try await small.fetchAll(in: zone).records)
        #expect(expected.count == Self.size - Self.stored / 5)
        #expect(Self.comparable(try await whole.fetchAll(in: zone).records) == expected)
        let reopened = try JSONFileDatabase(directory: directory.url.appendingPathComponent("whole"))
        #expect(Self.comparable(try await reopened.fetchAll(in: zone).records) == expected, "as read back from disk")

        // The same commit again (a retry after a lost answer): nothing more is stored.
        let token = try await whole.currentToken(in: zone)
        let retried = try await whole.commit(large, to: zone)
        #expect(retried.results.count == large.count)
        #expect(Self.comparable(try await whole.fetchAll(in: zone).records) == expected)
        #expect(try await whole.currentToken(in: zone) == token)
    }

    @Test(arguments: [3, 2_400, ZoneState.operationsCheckedInParallel + 299])
    func aConflictAnywhereInALargeCommitStoresNothing(at index: Int) async throws {
        let directory = try TemporaryDirectory("review8-large-conflict")
        defer { directory.remove() }
        let (setup, large) = Self.operations()
        let database = try JSONFileDatabase(directory: directory.url)
        for commit in setup { #expect(try await database.commit(commit, to: zone).isApplied) }
        let before = Self.comparable(try await database.fetchAll(in: zone).records)
        let token = try await database.currentToken(in: zone)
        var operations = large
        operations[index].baseVersion = 7
        let outcome = try await database.commit(operations, to: zone)
        #expect(!outcome.isApplied)
        #expect(outcome.results.count == operations.count)
        let current = index < Self.stored ? before["r\(index)"] : nil
        if case .conflict(let stored) = outcome.results[index] {
            var stored = stored
            stored?.writer = ""
            #expect(stored == current)
        } else {
            Issue.record("operation \(index): \(outcome.results[index])")
        }
        #expect(outcome.results.filter { $0 == .notApplied }.count == operations.count - 1)
        #expect(Self.comparable(try await database.fetchAll(in: zone).records) == before)
        #expect(try await database.currentToken(in: zone) == token)
    }
}
