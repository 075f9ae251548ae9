import Foundation
import MagicMirror
import Testing

/// `database.json`'s format (see the `JSONFileFormat` article): new databases are format 2,
/// whose journals reserve space that appends overwrite in place; a format-1 database, which
/// processes of versions from before append checksums may share, opens as it is and its
/// appends go at the end of the file; an upgrade is explicit, and other formats are refused.
@Suite(.timeLimit(.minutes(5))) struct JSONFileDatabaseFormatTests {
    let zone = ZoneID.public("Formats")

    private func databaseFile(_ directory: TemporaryDirectory) -> URL {
        directory.url.appendingPathComponent("database.json")
    }

    /// A database as an older version created it: `database.json` in format 1.
    private func formatOneDatabase(_ label: String) throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(label)
        let text = #"{"format":1,"identifier":"F1-"# + UUID().uuidString + #"","created":"2025-11-21T05:44:21Z"}"# + "\n"
        try Data(text.utf8).write(to: databaseFile(directory))
        return directory
    }

    /// The journal's size and the size of its data (without a reserved tail of spaces).
    private func journalSizes(_ db: JSONFileDatabase) throws -> (file: Int, data: Int) {
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        return (try Data(contentsOf: journal).count, try JSONFileTestSupport.journalData(journal).count)
    }

    @Test func aNewDatabaseIsFormatTwoAndItsJournalReservesSpace() async throws {
        let directory = try TemporaryDirectory("format-new")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let meta = try JSONFileTestSupport.jsonObject(databaseFile(directory))
        #expect(meta["format"] as? Int == 2)
        #expect(meta["identifier"] as? String == db.identifier)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let sizes = try journalSizes(db)
        #expect(sizes.file == sizes.data + 16 * 1024, "a format-2 journal reserves space past its data")
    }

    @Test func aFormatOneDatabaseOpensAsItIsAndAppendsAtTheEndOfTheFile() async throws {
        let directory = try formatOneDatabase("format-one")
        defer { directory.remove() }
        let before = try Data(contentsOf: databaseFile(directory))
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<5 {
            try await db.commit([jsonSave("r\(index)", ["v": index]), jsonSave("s\(index)", ["v": index])], to: zone)
            let sizes = try journalSizes(db)
            #expect(sizes.file == sizes.data, "commit \(index): nothing reserved past the data")
        }
        #expect(try Data(contentsOf: databaseFile(directory)) == before, "opening and writing do not upgrade")
        // The end lines carry checksums (older versions skip the keys) and read back whole.
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let lines = try JSONFileTestSupport.jsonLines(journal)
        #expect(lines.filter { $0["end"] as? Bool == true }.allSatisfy { $0["sum"] is String })
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.count == 10)
        #expect(reopened.problems.isEmpty)
    }

    /// A reserved tail in a format-1 journal (written by a format-2 process opened before a
    /// downgrade by hand, or by a version that reserved space before the marker existed) is
    /// cut before the next append, which goes at the end of the file.
    @Test func aFormatOneWriterCutsAReservedTailAndAppendsAtTheEnd() async throws {
        let directory = try formatOneDatabase("format-one-tail")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: UInt8(ascii: " "), count: 16 * 1024))
        try handle.close()

        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("b", ["v": 1])], to: zone)
        let sizes = try journalSizes(writer)
        #expect(sizes.file == sizes.data, "the spaces were cut and the append went at the end")
        #expect(try JSONFileTestSupport.jsonLines(journal).compactMap { $0["id"] as? String } == ["a", "b"])
        #expect(try await db.fetchAll(in: zone).records.map(\.id).sorted() == ["a", "b"])
        #expect(writer.problems.isEmpty && db.problems.isEmpty, "a reserved tail is no unfinished append")
    }

    /// The upgrade rewrites `database.json` only. An engine opened before it keeps the format
    /// it read (appends at the end); one opened after it reserves space; both read each
    /// other's appends.
    @Test func anUpgradedDatabaseReservesSpaceOnceReopened() async throws {
        let directory = try formatOneDatabase("format-upgrade")
        defer { directory.remove() }
        let early = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await early.commit([jsonSave("before", ["v": 1])], to: zone)

        let result = try JSONFileUpgrade.upgrade(directory: directory.path)
        #expect((result.from, result.to) == (1, 2))
        #expect(result.identifier == early.identifier)
        let meta = try JSONFileTestSupport.jsonObject(databaseFile(directory))
        #expect(meta["format"] as? Int == 2)
        #expect(meta["identifier"] as? String == early.identifier, "the identifier is kept")
        #expect(meta["created"] as? String == "2025-11-21T05:44:21Z", "and the creation date")
        #expect(JSONFileTestSupport.names(in: directory.url) == ["database.json", "public"], "no temporary file left")

        try await early.commit([jsonSave("still-one", ["v": 1])], to: zone)
        var sizes = try journalSizes(early)
        #expect(sizes.file == sizes.data, "an engine opened on format 1 keeps appending at the end")

        let late = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(late.identifier == early.identifier)
        try await late.commit([jsonSave("two", ["v": 1])], to: zone)
        sizes = try journalSizes(late)
        #expect(sizes.file == sizes.data + 16 * 1024, "an engine opened on format 2 reserves space")

        try await early.commit([jsonSave("one-again", ["v": 1])], to: zone)
        sizes = try journalSizes(early)
        #expect(sizes.file == sizes.data, "the format-1 engine cuts the tail and appends at the end")
        let everything: Set<String> = ["before", "still-one", "two", "one-again"]
        #expect(Set(try await late.fetchAll(in: zone).records.map(\.id)) == everything)
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == everything)
        #expect(reopened.problems.isEmpty && late.problems.isEmpty && early.problems.isEmpty)
    }

    /// `database.json` contents that this version does not open, and the kind of the refusal.
    static let refused: [(text: String, kind: MirrorError.Kind)] = [
        (#"{"format":3,"identifier":"from-the-future"}"#, .unsupportedFormat),
        (#"{"format":0,"identifier":"from-the-past"}"#, .unsupportedFormat),
        ("not json", .corruptEntry),
        (#"{"identifier":"no-format"}"#, .corruptEntry),
        (#"{"format":"2","identifier":"a-string"}"#, .corruptEntry),
        (#"{"format":2}"#, .corruptEntry),
    ]

    @Test(arguments: refused.indices)
    func otherFormatsAndGarbageAreRefusedAndNothingIsChanged(index: Int) throws {
        let (text, kind) = Self.refused[index]
        let directory = try TemporaryDirectory("format-refused")
        defer { directory.remove() }
        try Data(text.utf8).write(to: databaseFile(directory))
        do {
            _ = try JSONFileDatabase(isolatedDirectory: directory.url)
            Issue.record("\(text) was opened")
        } catch let error as MirrorError {
            #expect(error.kind == kind, "\(text): \(error)")
            #expect(error.message.contains("Nothing was changed"), "\(error.message)")
        }
        do {
            _ = try JSONFileUpgrade.upgrade(directory: directory.path)
            Issue.record("\(text) was upgraded")
        } catch {
            #expect(error.kind == kind, "\(text): \(error)")
        }
        #expect(try Data(contentsOf: databaseFile(directory)) == Data(text.utf8))
        #expect(JSONFileTestSupport.names(in: directory.url) == ["database.json"])
    }

    @Test func theUpgradeRefusesAFormatTwoDatabaseAndADirectoryWithoutOne() async throws {
        let directory = try TemporaryDirectory("format-upgrade-refused")
        defer { directory.remove() }
        do {
            _ = try JSONFileUpgrade.upgrade(directory: directory.path)
            Issue.record("a directory without database.json was upgraded")
        } catch {
            #expect(error.kind == .notFound)
            #expect(error.message.contains("not a MagicMirror database"), "\(error.message)")
        }
        #expect(JSONFileTestSupport.names(in: directory.url).isEmpty, "nothing was created")

        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let before = try Data(contentsOf: databaseFile(directory))
        do {
            _ = try JSONFileUpgrade.upgrade(directory: directory.path)
            Issue.record("a format-2 database was upgraded")
        } catch {
            #expect(error.kind == .unsupported)
            #expect(error.message.contains("format 2 already"), "\(error.message)")
        }
        #expect(try Data(contentsOf: databaseFile(directory)) == before)
        #expect(JSONFileTestSupport.names(in: directory.url) == ["database.json", "public"])
    }
}
