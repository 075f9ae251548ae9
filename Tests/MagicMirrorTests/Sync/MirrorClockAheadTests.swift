import Foundation
import MirrorTesting
import Testing

@testable import MagicMirror

/// A stored record whose clock is far ahead (written by another program, another role or a
/// device set to the wrong year) is shown, reported once, and never moves this process's
/// clock: a mirror that loaded a clock at the end of `Int64` died at its next edit, and one
/// a day ahead stamped every later change a day ahead.
@Suite(.timeLimit(.minutes(5))) struct MirrorClockAheadTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case inMemory, jsonFile, replicated
        var testDescription: String { rawValue }
    }

    /// A database of `kind` and a writer that stores past the mirror's database, as another
    /// process (or, for the replica, another device through the remote) would.
    private func open(_ kind: Kind, in directory: TemporaryDirectory) throws -> (
        database: any RecordDatabase, other: any RecordDatabase
    ) {
        switch kind {
        case .inMemory:
            let database = InMemoryDatabase()
            return (database, database.writer(named: "other"))
        case .jsonFile:
            return (
                try JSONFileDatabase(isolatedDirectory: directory.url),
                try JSONFileDatabase(isolatedDirectory: directory.url))
        case .replicated:
            let remote = InMemoryDatabase()
            let replica = ReplicatedDatabase(
                local: try JSONFileDatabase(isolatedDirectory: directory.url), remote: remote,
                retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(50))
            return (replica, remote.writer(named: "other"))
        }
    }

    private func store(_ chore: Chore, at clock: HLCTimestamp, in database: any RecordDatabase) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await database.commit(
            [.save(chore.id, fields: try encoder.encode(chore), baseVersion: 0, timestamp: clock)],
            to: .public(Chore.recordType))
    }

    private static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    @Test(arguments: Kind.allCases)
    func aRecordFarAheadIsShownReportedAndNotAdopted(kind: Kind) async throws {
        let directory = try TemporaryDirectory("clock-ahead")
        defer { directory.remove() }
        let (database, other) = try open(kind, in: directory)
        let endOfTime = Chore(id: "end-of-time", title: "Int64.max")
        let tomorrow = Chore(id: "tomorrow", title: "a day ahead")
        try await store(endOfTime, at: HLCTimestamp(millis: .max, counter: .max), in: other)
        try await store(tomorrow, at: HLCTimestamp(millis: Self.wallMillis + 86_400_000, counter: 0), in: other)

        let mirror = try await Mirror<Chore>(database: database)
        let errors = AsyncCollector(mirror.errors())
        try await waitUntil(mirror, "both records") { Set($0.map(\.id)) == ["end-of-time", "tomorrow"] }
        // Loaded (or pulled, for the replica) and reported, each with its id.
        let reported = try #require(mirror.lastError)
        #expect(reported.kind == .invalidRecord)
        #expect(reported.message.contains("ahead of this machine's clock"), "\(reported.message)")

        // Edits and a new record: no trap, and readings near the time.
        let index = try #require(mirror.dataModel.firstIndex(ofRecordID: "end-of-time"))
        mirror.dataModel[index].title = "edited"
        mirror.dataModel.append(Chore(id: "mine", title: "after"))
        try await mirror.flush()
        let stored = try await database.fetch(["mine", "end-of-time"], in: .public(Chore.recordType))
        let limit = Self.wallMillis + HybridLogicalClock.maximumOffset
        for record in stored {
            #expect(record.modified.millis <= limit, "\(record.id) stamped \(record.modified)")
        }
        #expect(stored.count == 2)

        // One arriving later, pulled: shown and reported too.
        try await store(
            Chore(id: "later", title: "pulled"), at: HLCTimestamp(millis: .max - 1, counter: 0), in: other)
        if let replica = database as? ReplicatedDatabase { try await replica.synchronize() }
        try await waitUntil(mirror, "the record pulled") { $0.contains { $0.id == "later" } }
        try await errors.wait("the pulled record reported") { $0.contains { $0.recordIDs == ["later"] } }
        #expect(HybridLogicalClock.shared.now().millis <= Self.wallMillis + HybridLogicalClock.maximumOffset)
    }
}
