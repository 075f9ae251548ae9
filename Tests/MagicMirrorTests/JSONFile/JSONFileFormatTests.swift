import Foundation
import MagicMirror
import Testing

/// The on-disk format of `JSONFileDatabase` (see the `JSONFileFormat` article): every file
/// is JSON that `jq` reads, and unknown versions are refused without touching anything.
@Suite(.timeLimit(.minutes(5))) struct JSONFileFormatTests {
    let zone = ZoneID.public("Todo")

    @Test func everyFileIsJSONReadableLineByLine() async throws {
        let directory = try TemporaryDirectory("format")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let tricky = "quote\"back\\slash ünïcödé 🎉\ttab"
        try await db.commit([jsonSave("a", ["title": "Milk"]), jsonSave(tricky, ["n": 1])], to: zone)
        let pretty = Data("{\n  \"title\" : \"Pretty\",\n  \"n\" : 2\n}".utf8)
        try await db.commit(
            [.save("p", fields: pretty, baseVersion: 0, timestamp: HybridLogicalClock.shared.now())], to: zone)
        try await db.commit([jsonDelete("a", base: 1)], to: zone)

        let zoneDirectory = db.directory(of: zone)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        let lines = try JSONFileTestSupport.jsonLines(journal)
        #expect(lines.count == 4)
        #expect(lines.map { $0["seq"] as? Int } == [1, 1, 2, 3])
        #expect(lines.map { $0["end"] as? Bool } == [nil, true, true, true], "the last line of each commit is marked")
        #expect(lines.map { $0["op"] as? String } == ["save", "save", "save", "delete"])
        #expect(lines.map { $0["version"] as? Int } == [1, 1, 1, 2])
        #expect(lines[1]["id"] as? String == tricky)
        #expect((lines[0]["fields"] as? [String: Any])?["title"] as? String == "Milk")
        #expect(lines[2]["fieldsText"] as? String == String(decoding: pretty, as: UTF8.self))
        #expect(lines[3]["fields"] == nil)
        for line in lines {
            #expect(line["writer"] as? String == db.writerID)
            #expect((line["clock"] as? String).flatMap(HLCTimestamp.init) != nil)
        }
        // The raw line keeps the fields last and exactly as saved.
        let firstLine = try #require(JSONFileTestSupport.journalText(journal).split(separator: "\n").first)
        #expect(firstLine.hasSuffix(#","fields":{"title":"Milk"}}"#))

        let meta = try JSONFileTestSupport.jsonObject(directory.url.appendingPathComponent("database.json"))
        #expect(meta["format"] as? Int == 2, "new databases are format 2 (JSONFileDatabaseFormatTests)")
        #expect(meta["identifier"] as? String == db.identifier)

        try await db.compact(zone)
        let snapshot = try JSONFileTestSupport.jsonObject(zoneDirectory.appendingPathComponent("snapshot.json"))
        #expect(snapshot["format"] as? Int == 1)
        #expect(snapshot["generation"] as? Int == 1)
        #expect(snapshot["sequence"] as? Int == 3)
        #expect(snapshot["count"] as? Int == 2)
        let records = try #require(snapshot["records"] as? [[String: Any]])
        #expect(Set(records.compactMap { $0["id"] as? String }) == ["p", tricky])
        let names = JSONFileTestSupport.names(in: zoneDirectory)
        #expect(names.contains("journal-1.ndjson"))
        #expect(!names.contains("journal-0.ndjson"), "the old generation's journal is removed")
        #expect(!names.contains { $0.hasPrefix("snapshot.json.tmp") })
        // The snapshot is also one record per line (line 1 header, last line "]}").
        let snapshotLines = try String(contentsOf: zoneDirectory.appendingPathComponent("snapshot.json"), encoding: .utf8)
            .split(separator: "\n")
        #expect(snapshotLines.count == 4)
        #expect(snapshotLines.last == "]}")

        // A fresh reader gets exactly the bytes that were saved.
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let fetched = try await reopened.fetch(["p", tricky, "a"], in: zone)
        #expect(fetched.count == 2)
        #expect(fetched.first { $0.id == "p" }?.fields == pretty)
        #expect(fetched.first { $0.id == tricky }?.fields == fields(["n": 1]))
        #expect(try await reopened.currentToken(in: zone) == ChangeToken(generation: 1, sequence: 3))
    }

    /// A snapshot's records share one buffer of fields bytes when it is read: each record
    /// must get exactly its own, whether written as an object or as text, with bad lines
    /// between them, and keep them through edits and another compaction.
    @Test func aReadSnapshotGivesEachRecordItsOwnFieldsBytes() async throws {
        let directory = try TemporaryDirectory("format-fields")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        var saved: [String: Data] = [:]
        var operations: [RecordOperation] = []
        for number in 0..<60 {
            let id = "r\(number)"
            // Every third record's fields are not compact: they are stored as text.
            let bytes = number % 3 == 0
                ? Data("{\n  \"n\" : \(number),\n  \"text\" : \"\(String(repeating: "x", count: number))\"\n}".utf8)
                : fields(["n": number, "text": String(repeating: "y", count: number)])
            saved[id] = bytes
            operations.append(.save(id, fields: bytes, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()))
        }
        try await db.commit(operations, to: zone)
        try await db.compact(zone)
        // Damage one record's line: it is quarantined, and the others keep their bytes.
        let snapshot = db.directory(of: zone).appendingPathComponent("snapshot.json")
        var lines = try String(contentsOf: snapshot, encoding: .utf8).components(separatedBy: "\n")
        let damaged = try #require(lines.firstIndex { $0.contains(#""id":"r7""#) })
        lines[damaged] = "{\"id\":\"r7\",\"version\":oops},"
        try Data(lines.joined(separator: "\n").utf8).write(to: snapshot)
        saved["r7"] = nil

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let fetched = try await reopened.fetchAll(in: zone)
        #expect(fetched.records.count == 59)
        for record in fetched.records { #expect(record.fields == saved[record.id], "record \(record.id)") }

        // Edits and another compaction keep the bytes of the records not edited.
        try await reopened.commit([jsonSave("r1", ["n": -1], base: 1), jsonDelete("r2", base: 1)], to: zone)
        saved["r1"] = fields(["n": -1])
        saved["r2"] = nil
        try await reopened.compact(zone)
        let again = try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: zone)
        #expect(again.records.count == 58)
        for record in again.records { #expect(record.fields == saved[record.id], "record \(record.id)") }
    }

    /// A journal's records take their fields from one buffer per read, as a snapshot's do:
    /// each must still get its own bytes, across commits of several records, deletes (no
    /// fields), fields stored as text, a damaged line, a repeated commit and an unfinished
    /// append.
    @Test func aReadJournalGivesEachRecordItsOwnFieldsBytes() async throws {
        let directory = try TemporaryDirectory("format-journal-fields")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        var saved: [String: Data] = [:]
        for commit in 0..<20 {
            var operations: [RecordOperation] = []
            for member in 0..<3 {
                let number = commit * 3 + member
                let id = "r\(number)"
                let bytes = number % 4 == 0
                    ? Data("{\n  \"n\" : \(number),\n  \"text\" : \"\(String(repeating: "x", count: number))\"\n}".utf8)
                    : fields(["n": number, "text": String(repeating: "y", count: number)])
                saved[id] = bytes
                operations.append(.save(id, fields: bytes, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()))
            }
            try await db.commit(operations, to: zone)
        }
        try await db.commit([jsonDelete("r5", base: 1), jsonSave("r6", ["n": -6], base: 1)], to: zone)
        saved["r5"] = nil
        saved["r6"] = fields(["n": -6])
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        var lines = try JSONFileTestSupport.journalText(journal).components(separatedBy: "\n")
        let damaged = try #require(lines.firstIndex { $0.contains(#""id":"r10""#) })
        lines[damaged] = #"{"seq":4,"op":"save","id":"r10","version":oops}"#
        // Its append no longer matches its checksum: the whole commit is set aside.
        for id in ["r9", "r10", "r11"] { saved[id] = nil }
        // A copy of the first commit's last line at the end: a repeated commit, not applied.
        let first = try #require(lines.first { $0.contains(#""id":"r2""#) })
        try Data((lines.joined(separator: "\n") + first + "\n" + #"{"seq":99,"op":"save","id":"torn""#).utf8)
            .write(to: journal)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let fetched = try await reopened.fetchAll(in: zone)
        #expect(Set(fetched.records.map(\.id)) == Set(saved.keys))
        for record in fetched.records { #expect(record.fields == saved[record.id], "record \(record.id)") }
        // Later appends, read by another engine incrementally, too.
        try await reopened.commit([jsonSave("late", ["n": 1]), jsonSave("r1", ["n": -1], base: 1)], to: zone)
        saved["late"] = fields(["n": 1])
        saved["r1"] = fields(["n": -1])
        let other = try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: zone)
        for record in other.records { #expect(record.fields == saved[record.id], "record \(record.id)") }
        #expect(other.records.count == saved.count)
    }

    @Test func anUnknownDatabaseFormatIsRefusedAndNothingIsTouched() throws {
        let directory = try TemporaryDirectory("format-db")
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("database.json")
        let contents = Data(#"{"format":3,"identifier":"from-the-future"}"#.utf8)
        try contents.write(to: file)
        do {
            _ = try JSONFileDatabase(isolatedDirectory: directory.url)
            Issue.record("a database in format 3 was opened")
        } catch let error as MirrorError {
            #expect(error.kind == .unsupportedFormat)
            #expect(error.message.contains("format 3"))
            #expect(error.file == file.resolvingSymlinksInPath().path || error.file == file.path)
        }
        #expect(try Data(contentsOf: file) == contents)
        #expect(JSONFileTestSupport.names(in: directory.url) == ["database.json"])
    }

    @Test func aDamagedDatabaseFileIsReportedAndKept() throws {
        let directory = try TemporaryDirectory("format-damaged")
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("database.json")
        let contents = Data("not json".utf8)
        try contents.write(to: file)
        let error = #expect(throws: MirrorError.self) { try JSONFileDatabase(isolatedDirectory: directory.url) }
        #expect(error?.kind == .corruptEntry)
        #expect(try Data(contentsOf: file) == contents)
    }

    @Test func anUnknownSnapshotFormatIsRefusedAndNothingIsTouched() async throws {
        let directory = try TemporaryDirectory("format-snapshot")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("a", ["v": 1])], to: zone)
        let zoneDirectory = writer.directory(of: zone)
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        let future = Data("{\"format\":7,\"generation\":0,\"sequence\":1,\"records\":[\n]}\n".utf8)
        try future.write(to: snapshot)
        let journal = try Data(contentsOf: zoneDirectory.appendingPathComponent("journal-0.ndjson"))
        let names = JSONFileTestSupport.names(in: zoneDirectory)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        do {
            _ = try await reader.fetchAll(in: zone)
            Issue.record("a snapshot in format 7 was read")
        } catch let error as MirrorError {
            #expect(error.kind == .unsupportedFormat)
            #expect(error.recordType == "Todo")
        }
        await #expect(throws: MirrorError.self) { try await reader.commit([jsonSave("b", ["v": 1])], to: zone) }
        #expect(try Data(contentsOf: snapshot) == future)
        #expect(try Data(contentsOf: zoneDirectory.appendingPathComponent("journal-0.ndjson")) == journal)
        #expect(JSONFileTestSupport.names(in: zoneDirectory) == names)
    }

    @Test func instancesOnOneDirectoryShareOneEngine() async throws {
        let directory = try TemporaryDirectory("format-shared")
        defer { directory.remove() }
        let first = try JSONFileDatabase(directory: directory.url)
        // Another spelling of the same directory.
        let second = try JSONFileDatabase(directory: directory.url.appendingPathComponent("./"))
        let isolated = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(first.writerID == second.writerID)
        #expect(first.identifier == second.identifier)
        #expect(isolated.identifier == first.identifier)
        #expect(isolated.writerID != first.writerID)
        let heard = MutexBox<[String]>([])
        let subscription = try first.subscribe(to: zone) { heard.append(contentsOf: $0.recordIDs) }
        defer { subscription.cancel() }
        try await second.commit([jsonSave("x", ["v": 1])], to: zone)
        #expect(heard.value == ["x"], "a commit through another instance of the same engine is delivered at once")
        #expect(try await first.fetch(["x"], in: zone).count == 1)
    }

    @Test func theDefaultDirectoryFollowsTheEnvironment() {
        let path = JSONFileDatabase.defaultDirectory.path
        if let explicit = ProcessInfo.processInfo.environment["MAGICMIRROR_DIRECTORY"], !explicit.isEmpty {
            #expect(path == URL(fileURLWithPath: explicit).path)
        } else {
            #if os(Linux)
            #expect(path.hasSuffix("/magicmirror"))
            #else
            #expect(path.hasSuffix("/Library/Application Support/MagicMirror"))
            #endif
        }
    }
}
