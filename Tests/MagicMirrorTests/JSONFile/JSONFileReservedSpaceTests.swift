import Foundation
import MagicMirror
import Testing

/// Spaces after a journal's data (left by versions that reserved journal space, or by
/// another program): readers skip them and find commits written before and after them;
/// writers cut them before appending, so that every append goes at the end of the file
/// and a reader only ever sees a prefix of one.
@Suite struct JSONFileReservedSpaceTests {
    let zone = ZoneID.public("Reserved")

    private func size(_ journal: URL) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: journal.path)[.size] as? Int)
    }

    /// Writes `count` spaces after the journal's data, as a version that reserved space did.
    private func reserve(_ count: Int, in journal: URL) throws {
        try JSONFileTestSupport.append(repeatElement(UInt8(ascii: " "), count: count), to: journal)
    }

    @Test func everyCommitGoesAtTheEndOfTheFile() async throws {
        let directory = try TemporaryDirectory("reserved-none")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 {
            try await db.commit([jsonSave("r\(index)", ["v": index])], to: zone)
            let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
            #expect(try size(journal) == JSONFileTestSupport.journalData(journal).count, "no space after the data")
        }
    }

    @Test func spacesAfterTheDataAreCutBeforeTheNextAppend() async throws {
        let directory = try TemporaryDirectory("reserved-cut")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let data = try JSONFileTestSupport.journalData(journal)
        try reserve(16 * 1024, in: journal)

        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await other.fetchAll(in: zone).records.map(\.id) == ["a"], "the spaces are not data")
        #expect(other.problems.isEmpty, "nor an unfinished append")

        try await db.commit([jsonSave("b", ["v": 1])], to: zone)
        let after = try Data(contentsOf: journal)
        #expect(after.starts(with: data))
        #expect(after.count > data.count && after.last == UInt8(ascii: "\n"), "cut, then appended at the end")
        #expect(!after.contains(UInt8(ascii: " ")), "no space left between the lines")
        #expect(try JSONFileTestSupport.jsonLines(journal).compactMap { $0["id"] as? String } == ["a", "b"])
        #expect(Set(try await other.fetchAll(in: zone).records.map(\.id)) == ["a", "b"])
        #expect(db.problems.isEmpty && other.problems.isEmpty)
    }

    /// A reader that read up to spaces after the data still sees the commits that follow:
    /// the file's size changes, and its watcher fires.
    @Test(arguments: [JSONFileDatabase.ChangeDetection.fileSystemEvents, .polling])
    func anotherEngineSeesCommitsAfterSpaces(detection: JSONFileDatabase.ChangeDetection) async throws {
        let directory = try TemporaryDirectory("reserved-reader")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let reader = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(pollInterval: .milliseconds(20), changeDetection: detection))
        try await writer.commit([jsonSave("first", ["v": 1])], to: zone)
        try reserve(4096, in: try JSONFileTestSupport.journal(in: writer.directory(of: zone)))
        #expect(try await reader.fetchAll(in: zone).records.map(\.id) == ["first"])
        let heard = AsyncCollector<String>()
        let subscription = try reader.subscribe(to: zone) { notification in
            for id in notification.recordIDs { heard.append(id) }
        }
        defer { subscription.cancel() }

        for index in 0..<5 {
            try await writer.commit([jsonSave("next\(index)", ["v": 1])], to: zone)
        }
        let expected: Set<String> = ["next0", "next1", "next2", "next3", "next4"]
        try await heard.wait("the five commits") { expected.isSubset(of: Set($0)) }
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == expected.union(["first"]))
        #expect(reader.problems.isEmpty)
    }

    /// A writer that appends at the end of the file (`echo >>`) puts its line after the
    /// spaces: it is read, and later appends go after it.
    @Test func aLineAppendedAfterSpacesIsRead() async throws {
        let directory = try TemporaryDirectory("reserved-after")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        try reserve(100, in: journal)
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
}
