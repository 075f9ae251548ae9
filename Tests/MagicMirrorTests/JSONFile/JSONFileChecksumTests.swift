import Foundation
import Testing

@testable import MagicMirror

/// Every journal append ends with a checksum of its bytes, so that an append written in
/// place over reserved space and seen with a hole (a page read before the write reached it,
/// or lost in a power cut) is never applied in part.
@Suite(.timeLimit(.minutes(5))) struct JSONFileChecksumTests {
    let zone = ZoneID.public("Checksums")

    // MARK: - The hash

    /// Digests printed by `xxhsum -H1` (xxHash's own tool) for the same bytes.
    @Test func theDigestIsXXH64() {
        let cases: [(String, UInt64)] = [
            ("", 0xEF46_DB37_51D8_E999),
            ("abc", 0x44BC_2CF5_AD77_0999),
            ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!", 0xAA4D_CAD6_9FAC_0EB3),
            (String(repeating: "x", count: 1000), 0x4CB9_A3B6_9CB7_00E1),
            (String((0..<1000).map { Character(UnicodeScalar(UInt8(32 + $0 % 95))) }), 0xF013_E556_8570_B546),
        ]
        for (text, expected) in cases {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBytes { XXHash64.digest($0.baseAddress!, count: $0.count) } == expected,
                    "\(bytes.count) bytes")
        }
    }

    /// Fed in pieces of any sizes, the hash is that of the bytes in one piece.
    @Test func piecesHashLikeTheWhole() {
        let bytes = (0..<1000).map { UInt8(32 + $0 % 95) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var hash = XXHash64()
            var position = 0
            while position < bytes.count {
                let length = min(Int.random(in: 0...70, using: &generator), bytes.count - position)
                bytes.withUnsafeBytes { hash.update($0.baseAddress! + position, count: length) }
                position += length
            }
            #expect(hash.finalize() == 0xF013_E556_8570_B546)
        }
    }

    // MARK: - Writing

    @Test func everyAppendEndsWithTheChecksumOfItsBytes() async throws {
        let directory = try TemporaryDirectory("checksum-written")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        try await db.commit([jsonSave("b", ["v": 1]), jsonSave("c", ["v": 2])], to: zone)
        try await db.commit([jsonDelete("a", base: 1)], to: zone)
        let data = try JSONFileTestSupport.journalData(try JSONFileTestSupport.journal(in: db.directory(of: zone)))
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
        var offset = 0
        var appendStart = 0
        var ends = 0
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            if object["end"] as? Bool == true {
                ends += 1
                #expect(object["prior"] as? Int == offset - appendStart, "the bytes of the append before its end")
                let sum = try #require(object["sum"] as? String)
                // What a person would do: take the append, leave out the 16 digits, xxhsum it.
                let append = Array(data[appendStart..<(offset + line.count + 1)])
                let text = String(decoding: append, as: UTF8.self)
                    .replacingOccurrences(of: "\"sum\":\"\(sum)\"", with: "\"sum\":\"\"")
                let digest = Array(text.utf8).withUnsafeBytes { XXHash64.digest($0.baseAddress!, count: $0.count) }
                #expect(sum == String(digest, radix: 16).leftPadded(to: 16))
                appendStart = offset + line.count + 1
            } else {
                #expect(object["sum"] == nil && object["prior"] == nil, "only the last line of an append")
            }
            offset += line.count + 1
        }
        #expect(ends == 3)
    }

    /// The format article's example of a checksum is one a reader accepts.
    @Test func theFormatArticlesExampleChecksumMatches() throws {
        let article = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources/MagicMirror/Documentation.docc/JSONFileFormat.md")
        let text = try String(contentsOf: article, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.contains(#""prior":0,"sum":""#) })
        let result = scan(Array((line + "\n").utf8))
        #expect(result.commits.map { $0.records.map(\.id) } == [["a1"]])
    }

    // MARK: - Reading

    /// The bytes of one sealed append of `records` as commit `sequence`.
    private func sealedAppend(sequence: Int, _ ids: [String]) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 256)
        for (index, id) in ids.enumerated() {
            let record = StoredRecord(
                id: id, version: 1, fields: Data(#"{"v":1}"#.utf8),
                modified: HLCTimestamp(millis: 1_763_703_120_123, counter: UInt32(index)), writer: "w1-test")
            append.add(sequence: sequence, record: record, isLast: index == ids.count - 1)
        }
        return Array(append.sealed().joined())
    }

    /// `bytes` with line `line` made spaces: an append written in place and read with a
    /// hole where the reserved spaces were not overwritten yet.
    private func withHole(_ bytes: [UInt8], line: Int = 0, filler: UInt8 = UInt8(ascii: " ")) -> [UInt8] {
        var holed = bytes
        let newlines = holed.indices.filter { holed[$0] == UInt8(ascii: "\n") }
        let start = line == 0 ? 0 : newlines[line - 1] + 1
        for index in start...newlines[line] { holed[index] = filler }
        return holed
    }

    private func scan(_ bytes: [UInt8]) -> JSONFileFormat.JournalScan {
        var parser = JSONFileFormat.LineParser()
        return bytes.withUnsafeBufferPointer {
            JSONFileFormat.scanJournal($0.baseAddress!, count: $0.count, after: 0, parser: &parser)
        }
    }

    @Test func aScanAppliesOnlyAppendsWhoseChecksumMatches() {
        let whole = sealedAppend(sequence: 1, ["a", "b"])
        #expect(scan(whole).commits.map { $0.records.map(\.id) } == [["a", "b"]])
        #expect(scan(whole).consumed == whole.count)

        let holed = scan(withHole(whole))
        #expect(holed.commits.isEmpty, "the line after the hole is not applied alone")
        #expect(holed.consumed == 0 && holed.bad.isEmpty && !holed.orphaned, "it waits, like an unfinished append")

        var changed = whole
        changed[changed.lastIndex(of: UInt8(ascii: "1"))!] = UInt8(ascii: "2")  // a field of the end line
        #expect(scan(changed).commits.isEmpty)

        let next = sealedAppend(sequence: 2, ["c"])
        let followed = scan(withHole(whole) + next)
        #expect(followed.commits.map { $0.records.map(\.id) } == [["c"]])
        #expect(followed.orphaned, "the lines before the complete append belong to none")
        // The hole's spaces and the line after them read as one line, which is set aside.
        #expect(followed.setAside.map(\.offset) == [0] && followed.bad.isEmpty)
        #expect(followed.consumed == whole.count + next.count)
    }

    /// The append before a whole one lost its last line, newline included, to a hole (spaces
    /// where the reserved space was not overwritten, or zeros after a power cut): the whole
    /// append's first line reads together with the hole, and is read again from the
    /// append's first byte, so that the commit is applied whole.
    @Test(arguments: [UInt8(ascii: " "), 0])
    func anAppendWhoseFirstLineFollowsAHoleIsAppliedWhole(filler: UInt8) {
        let damaged = withHole(sealedAppend(sequence: 2, ["b", "c"]), line: 1, filler: filler)
        let whole = sealedAppend(sequence: 3, ["d", "e"])
        let result = scan(damaged + whole)
        #expect(result.commits.map { $0.records.map(\.id) } == [["d", "e"]])
        #expect(result.setAside.count == 1, "b's line, the rest of its commit")
        #expect(result.bad.count == (filler == 0 ? 1 : 0), "the zeros before d's line")
        #expect(result.consumed == damaged.count + whole.count)
    }

    /// The same, opened: never half of commit 3.
    @Test func anAppendAfterAHoleIsNotAppliedInPart() async throws {
        let directory = try TemporaryDirectory("checksum-hole-half")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        try JSONFileTestSupport.append(
            withHole(sealedAppend(sequence: 2, ["b", "c"]), line: 1) + sealedAppend(sequence: 3, ["d", "e"]),
            to: journal)
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == ["a", "d", "e"])
    }

    /// An append that says it starts before the bytes the reader has (or in one already
    /// read) cannot be checked, so it is not applied.
    @Test func anAppendReachingBeforeTheStretchIsNotApplied() {
        let whole = sealedAppend(sequence: 1, ["a", "b"])
        let firstLine = whole.firstIndex(of: UInt8(ascii: "\n"))! + 1
        let tail = Array(whole[firstLine...])
        #expect(scan(tail).commits.isEmpty && scan(tail).consumed == 0)
    }

    @Test func checksumKeysOutOfPlaceMakeALineBad() {
        let lines = [
            #"{"seq":1,"op":"save","id":"a","version":1,"clock":"1-0","writer":"w","end":true,"sum":"0123456789abcdef","fields":{}}"#,
            #"{"seq":1,"op":"save","id":"a","version":1,"clock":"1-0","writer":"w","prior":0,"sum":"0123456789abcdef","fields":{}}"#,
            #"{"seq":1,"op":"save","id":"a","version":1,"clock":"1-0","writer":"w","end":true,"prior":0,"sum":"0123456789ABCDEF","fields":{}}"#,
            #"{"seq":1,"op":"save","id":"a","version":1,"clock":"1-0","writer":"w","end":true,"prior":-1,"sum":"0123456789abcdef","fields":{}}"#,
        ]
        for line in lines {
            var parser = JSONFileFormat.LineParser()
            let bytes = Array(line.utf8)
            let parsed = bytes.withUnsafeBufferPointer { parser.parseJournalLine($0.baseAddress!, start: 0, end: $0.count) }
            #expect(parsed == nil, "\(line)")
        }
    }

    /// Opened after a power cut that left an append with a hole: the writer cuts it off
    /// (kept in quarantine), and none of its commits is applied.
    @Test func anAppendWithAHoleAtTheEndIsCutOff() async throws {
        let directory = try TemporaryDirectory("checksum-hole")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let zoneDirectory = db.directory(of: zone)
        let journal = try JSONFileTestSupport.journal(in: zoneDirectory)
        try JSONFileTestSupport.append(withHole(sealedAppend(sequence: 2, ["b", "c"])), to: journal)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await reopened.fetchAll(in: zone)
        #expect(all.records.map(\.id) == ["a"])
        #expect(all.token.sequence == 1)
        #expect(JSONFileTestSupport.names(in: zoneDirectory).contains { $0.hasSuffix(".torn") })
        try await reopened.commit([jsonSave("d", ["v": 1])], to: zone)
        let after = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await after.fetchAll(in: zone).records.map(\.id)) == ["a", "d"])
    }

    /// An append with a hole followed by a complete one is damage (the later append was
    /// written after the earlier one was whole): its lines are set aside as bad and reported,
    /// and the later append is applied.
    @Test func anAppendWithAHoleBeforeACompleteOneIsSetAside() async throws {
        let directory = try TemporaryDirectory("checksum-hole-followed")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let zoneDirectory = db.directory(of: zone)
        let journal = try JSONFileTestSupport.journal(in: zoneDirectory)
        try JSONFileTestSupport.append(
            withHole(sealedAppend(sequence: 2, ["b", "c"])) + sealedAppend(sequence: 3, ["d"]), to: journal)
        #expect(JSONFileInspection.inspect(zone, at: zoneDirectory.path).problems.map(\.kind) == ["damaged-append"],
                "mirror-db verify names it")

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == ["a", "d"])
        #expect(reader.problems.contains { $0.message.contains("does not match its checksum") }, "set aside, reported")
        #expect(JSONFileTestSupport.names(in: zoneDirectory).contains { $0.hasSuffix(".bad") })
    }

    /// A line without a checksum (an older version, or `echo >>`) ends only what follows the
    /// last append it cannot vouch for: an append with a hole before it stays out.
    @Test func aLineWithoutAChecksumDoesNotTakeInAnAppendWithAHole() async throws {
        let directory = try TemporaryDirectory("checksum-hole-legacy")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        let legacy = #"{"seq":3,"op":"save","id":"x","version":1,"clock":"1763703120123-0","writer":"w1-old","end":true,"fields":{"v":1}}"#
        try JSONFileTestSupport.append(withHole(sealedAppend(sequence: 2, ["b", "c"])) + Array((legacy + "\n").utf8), to: journal)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == ["a", "x"])
    }

    /// A reader that sees an append while it is written in place, with a hole, applies none
    /// of it; once the append is whole, all of it at once. (A hole at the append's first byte
    /// looks like nothing new: the reader reads when that byte is written.)
    @Test func aReaderAppliesAnAppendWrittenInPlaceOnlyWhenItIsWhole() async throws {
        let directory = try TemporaryDirectory("checksum-live")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("a", ["v": 1])], to: zone)
        #expect(try await reader.fetchAll(in: zone).records.map(\.id) == ["a"])
        let heard = AsyncCollector<[String]>()
        let subscription = try reader.subscribe(to: zone) { heard.append($0.recordIDs.sorted()) }
        defer { subscription.cancel() }

        let journal = try JSONFileTestSupport.journal(in: writer.directory(of: zone))
        let end = try JSONFileTestSupport.journalData(journal).count
        let append = sealedAppend(sequence: 2, ["b", "c", "d"])
        let sizeBefore = try Data(contentsOf: journal).count
        try JSONFileTestSupport.append(withHole(append, line: 1), to: journal)
        #expect(try Data(contentsOf: journal).count == sizeBefore, "written over reserved space")
        #expect(try await reader.fetchAll(in: zone).records.map(\.id) == ["a"])

        // The rest of the write arrives.
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: Data(append))
        try handle.close()
        try await heard.wait("the append") { $0.contains(["b", "c", "d"]) }
        #expect(heard.items == [["b", "c", "d"]], "never the lines around the hole alone")
        #expect(Set(try await reader.fetchAll(in: zone).records.map(\.id)) == ["a", "b", "c", "d"])
        #expect(reader.problems.isEmpty)
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - count)) + self
    }
}
