#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Compaction: automatic when the journal outgrows the snapshot, safe for readers holding
/// older tokens, and crash-safe at every step.
@Suite(.timeLimit(.minutes(5))) struct JSONFileCompactionTests {
    let zone = ZoneID.public("Todo")

    @Test func compactionWhileAReaderHoldsAnOlderToken() async throws {
        let directory = try TemporaryDirectory("compaction-reader")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        // The reader notices other writers only when it reads (its poll never comes), so it
        // sees nothing of the commits below before the compaction.
        let reader = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(pollInterval: .seconds(3600), changeDetection: .polling))
        try await writer.commit([jsonSave("keep", ["v": 1]), jsonSave("gone", ["v": 1])], to: zone)
        let held = try await reader.fetchAll(in: zone)
        #expect(held.token == ChangeToken(generation: 0, sequence: 1))
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
        let subscription = try reader.subscribe(to: zone) { continuation.yield($0) }
        defer { subscription.cancel() }

        try await writer.commit([jsonDelete("gone", base: 1), jsonSave("keep", ["v": 2], base: 1)], to: zone)
        try await writer.commit([jsonSave("new", ["v": 1])], to: zone)
        try await writer.compact(zone)

        let changes = try await reader.changes(in: zone, since: held.token)
        #expect(changes.isComplete, "a token of an older generation gets the whole zone")
        #expect(Set(changes.records.map(\.id)) == ["keep", "new"])
        #expect(object(changes.records.first { $0.id == "keep" }?.fields)?["v"] as? Int == 2)
        #expect(changes.token == ChangeToken(generation: 1, sequence: 3))
        // The subscriber hears that "gone" was deleted, although its tombstone was compacted
        // away before the reader saw it.
        let deleted = try await firstValue(of: stream, within: testTimeout) {
            $0.reason == .deleted && $0.recordIDs.contains("gone")
        }
        #expect(deleted.token.generation == 1)

        // Writing and reading go on in the new generation.
        let next = try await writer.commit([jsonSave("later", ["v": 1])], to: zone)
        let incremental = try await reader.changes(in: zone, since: changes.token)
        #expect(!incremental.isComplete)
        #expect(incremental.records.map(\.id) == ["later"])
        #expect(incremental.token == next.token)
    }

    @Test func theJournalIsCompactedWhenItOutgrowsTheSnapshot() async throws {
        let directory = try TemporaryDirectory("compaction-auto")
        defer { directory.remove() }
        let db = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(durability: .relaxed, compactionThreshold: 2_000))
        for index in 0..<100 {
            try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone)
            if index % 3 == 0 { try await db.commit([jsonDelete("r\(index)", base: 1)], to: zone) }
        }
        try await db.waitForBackgroundWork(in: zone)
        let token = try await db.currentToken(in: zone)
        #expect(token.generation >= 1)
        let zoneDirectory = db.directory(of: zone)
        let journals = JSONFileTestSupport.names(in: zoneDirectory).filter { $0.hasPrefix("journal-") }
        #expect(journals == ["journal-\(token.generation).ndjson"], "older journals are removed")
        let snapshot = try JSONFileTestSupport.jsonObject(zoneDirectory.appendingPathComponent("snapshot.json"))
        #expect(!(snapshot["records"] as? [[String: Any]] ?? []).isEmpty)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await reopened.fetchAll(in: zone)
        #expect(Set(all.records.map(\.id)) == Set((0..<100).filter { $0 % 3 != 0 }.map { "r\($0)" }))
        #expect(all.token == token)
    }

    /// A compaction killed after writing the new generation's files but before the rename
    /// leaves an empty next journal and a temporary snapshot: ignored, then overwritten.
    @Test func aCompactionStoppedBeforeItsRenameChangesNothing() async throws {
        let directory = try TemporaryDirectory("compaction-crash-early")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        let zoneDirectory = db.directory(of: zone)
        try Data().write(to: zoneDirectory.appendingPathComponent("journal-1.ndjson"))
        try Data("{\"format\":1,\"generation\":1,\"sequ".utf8)
            .write(to: zoneDirectory.appendingPathComponent("snapshot.json.tmp"))

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.count == 5)
        #expect(try await reopened.currentToken(in: zone) == ChangeToken(generation: 0, sequence: 5))
        try await reopened.commit([jsonSave("r5", ["n": 5])], to: zone)
        try await reopened.compact(zone)
        let again = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await again.fetchAll(in: zone).records.count == 6)
        #expect(try await again.currentToken(in: zone) == ChangeToken(generation: 1, sequence: 6))
        #expect(!JSONFileTestSupport.names(in: zoneDirectory).contains("snapshot.json.tmp"))
    }

    /// A compaction killed after the rename but before the old journal was removed: the old
    /// journal is ignored (the snapshot holds all of it) and removed later.
    @Test func aCompactionStoppedAfterItsRenameLosesNothing() async throws {
        let directory = try TemporaryDirectory("compaction-crash-late")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        let zoneDirectory = db.directory(of: zone)
        let oldJournal = try Data(contentsOf: zoneDirectory.appendingPathComponent("journal-0.ndjson"))
        try await db.compact(zone)
        try oldJournal.write(to: zoneDirectory.appendingPathComponent("journal-0.ndjson"))

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.count == 5)
        #expect(try await reopened.currentToken(in: zone) == ChangeToken(generation: 1, sequence: 5))
        try await reopened.commit([jsonSave("r5", ["n": 5])], to: zone)
        try await reopened.compact(zone)
        #expect(!JSONFileTestSupport.names(in: zoneDirectory).contains("journal-0.ndjson"))
        #expect(try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: zone).records.count == 6)
    }

    @Test(arguments: [FileSystem.Operation.rename, .fsync, .write, .open])
    func aFailedCompactionLeavesTheZoneAsItWas(failing operation: FileSystem.Operation) async throws {
        let directory = try TemporaryDirectory("compaction-fail")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        for index in 0..<5 { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        let zoneDirectory = db.directory(of: zone)
        let namesBefore = JSONFileTestSupport.names(in: zoneDirectory)
        let journalBefore = try Data(contentsOf: zoneDirectory.appendingPathComponent("journal-0.ndjson"))

        faulty.failNext(operation, errno: EIO)
        await #expect(throws: MirrorError.self) { try await db.compact(zone) }
        #expect(JSONFileTestSupport.names(in: zoneDirectory) == namesBefore, "no new files are left behind")
        #expect(try Data(contentsOf: zoneDirectory.appendingPathComponent("journal-0.ndjson")) == journalBefore)
        #expect(try await db.currentToken(in: zone) == ChangeToken(generation: 0, sequence: 5))

        try await db.commit([jsonSave("r5", ["n": 5])], to: zone)
        try await db.compact(zone)
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.count == 6)
        #expect(try await reopened.currentToken(in: zone) == ChangeToken(generation: 1, sequence: 6))
    }
}
