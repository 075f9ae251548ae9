import Foundation
import MagicMirror
import Testing

/// A journal reserves space past its data (spaces) so that commits overwrite reserved bytes
/// instead of growing the file, and their flush writes data only: readers, recovery and
/// other writers find where the data ends.
@Suite(.timeLimit(.minutes(5))) struct JSONFileReservedSpaceTests {
    let zone = ZoneID.public("Reserved")

    private func sizeAndData(_ journal: URL) throws -> (size: Int, data: Data) {
        let size = try #require(try FileManager.default.attributesOfItem(atPath: journal.path)[.size] as? Int)
        return (size, try JSONFileTestSupport.journalData(journal))
    }

    @Test func commitsOverwriteTheSpaceTheFirstOneReserved() async throws {
        let directory = try TemporaryDirectory("reserved")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let first = try sizeAndData(journal)
        #expect(first.size == first.data.count + 16 * 1024, "the first append reserves 16 KiB past itself")
        let whole = try Data(contentsOf: journal)
        #expect(whole[first.data.count...].allSatisfy { $0 == UInt8(ascii: " ") }, "the reserved tail is spaces")

        try await db.commit([jsonSave("b", ["v": 1])], to: zone)
        try await db.commit([jsonSave("c", ["v": 1]), jsonSave("d", ["v": 1])], to: zone)
        let later = try sizeAndData(journal)
        #expect(later.size == first.size, "later appends land in the reserved space")
        #expect(later.data.count > first.data.count)
        #expect(later.data.starts(with: first.data))
        // Still JSON text, line by line, as `jq` reads it.
        #expect(try JSONFileTestSupport.jsonLines(journal).compactMap { $0["id"] as? String } == ["a", "b", "c", "d"])
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["a", "b", "c", "d"])
        #expect(reopened.problems.isEmpty, "the reserved tail is not an unfinished append")
    }

    @Test func anAppendThatFillsTheReservedSpaceReservesMore() async throws {
        let directory = try TemporaryDirectory("reserved-more")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let text = String(repeating: "x", count: 1_000)
        var sizes: Set<Int> = []
        for index in 0..<40 {
            try await db.commit([jsonSave("r\(index)", ["text": text])], to: zone)
            let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
            let (size, data) = try sizeAndData(journal)
            #expect(size > data.count, "space stays reserved past the data")
            #expect(size <= data.count + 16 * 1024)
            sizes.insert(size)
        }
        #expect(sizes.count >= 2 && sizes.count < 40, "the file grows now and then, not with every commit")
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.count == 40)
        #expect(reopened.problems.isEmpty)
    }

    /// A commit over reserved space leaves the journal's size as it was: another engine must
    /// still see it, both when it reads and through its watcher.
    @Test(arguments: [JSONFileDatabase.ChangeDetection.fileSystemEvents, .polling])
    func anotherEngineSeesCommitsThatKeepTheSize(detection: JSONFileDatabase.ChangeDetection) async throws {
        let directory = try TemporaryDirectory("reserved-reader")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let reader = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(pollInterval: .milliseconds(20), changeDetection: detection))
        try await writer.commit([jsonSave("first", ["v": 1])], to: zone)
        #expect(try await reader.fetchAll(in: zone).records.map(\.id) == ["first"])
        let heard = AsyncCollector<String>()
        let subscription = try reader.subscribe(to: zone) { notification in
            for id in notification.recordIDs { heard.append(id) }
        }
        defer { subscription.cancel() }
        let journal = try JSONFileTestSupport.journal(in: writer.directory(of: zone))
        let size = try sizeAndData(journal).size

        for index in 0..<5 {
            try await writer.commit([jsonSave("next\(index)", ["v": 1])], to: zone)
        }
        #expect(try sizeAndData(journal).size == size, "every commit landed in reserved space")
        let expected: Set<String> = ["next0", "next1", "next2", "next3", "next4"]
        try await heard.wait("the five commits") { expected.isSubset(of: Set($0)) }
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == expected.union(["first"]))
        // A read that finds nothing new finds nothing.
        #expect(try await reader.changes(in: zone, since: try await writer.fetchAll(in: zone).token).records.isEmpty)
    }

    /// A writer that appends at the end of the file (an earlier version of MagicMirror, or
    /// `echo >>`) puts its line after the reserved spaces: it is read, and later appends go
    /// after it.
    @Test func aLineAppendedAfterTheReservedSpaceIsRead() async throws {
        let directory = try TemporaryDirectory("reserved-after")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let line = #"{"seq":2,"op":"save","id":"b","version":1,"clock":"1763703120123-0","writer":"w1-old","end":true,"fields":{"v":1}}"#
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((line + "\n").utf8))
        try handle.close()

        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await other.fetchAll(in: zone).records.map(\.id)) == ["a", "b"])
        try await db.commit([jsonSave("c", ["v": 1])], to: zone)
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await reopened.fetchAll(in: zone)
        #expect(Set(all.records.map(\.id)) == ["a", "b", "c"])
        #expect(all.token.sequence == 3)
        #expect(reopened.problems.isEmpty && other.problems.isEmpty && db.problems.isEmpty)
    }

    /// A relaxed commit (no flush) reserves space too, and readers treat it alike.
    @Test func relaxedCommitsUseTheReservedSpaceToo() async throws {
        let directory = try TemporaryDirectory("reserved-relaxed")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, options: .init(durability: .relaxed))
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        try await db.commit([jsonSave("b", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let (size, data) = try sizeAndData(journal)
        #expect(size > data.count)
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["a", "b"])
        #expect(reopened.problems.isEmpty)
    }
}
