import Foundation
import Testing

@testable import MagicMirror

/// Review (review-sum6): an append whose checksum matches can still be applied in part when
/// the bytes just before its first `{` are not a newline (the previous append's last line,
/// newline included, is in a hole): `scanJournal` decides which pending lines belong to the
/// append by the *segment* start (after the previous newline), not by the append's first
/// byte, so the append's first line is set aside and the rest of it applied.
@Suite struct JSONFileChecksumReviewTests {
    let zone = ZoneID.public("ChecksumReview")

    private func sealedAppend(sequence: Int, _ ids: [String]) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 256)
        for (index, id) in ids.enumerated() {
            let record = StoredRecord(
                id: id, version: 1, fields: Data(#"{"v":1}"#.utf8),
                modified: HLCTimestamp(millis: 1_763_703_120_123, counter: UInt32(index)), writer: "w1-test")
            append.add(sequence: sequence, record: record, isLast: index == ids.count - 1)
        }
        return append.sealed()
    }

    /// `bytes` with line `line` (newline included) replaced by `filler`: what a hole reads as.
    private func withHole(_ bytes: [UInt8], line: Int, filler: UInt8 = UInt8(ascii: " ")) -> [UInt8] {
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

    /// Commit 3 is one commit of two records (d, e); its append is whole and matches.
    /// The append before it (commit 2) lost its last line, newline included, to a hole.
    @Test(arguments: [UInt8(ascii: " "), 0])
    func aWholeAppendAfterAHoleIsAppliedWholeOrNotAtAll(filler: UInt8) {
        let damaged = withHole(sealedAppend(sequence: 2, ["b", "c"]), line: 1, filler: filler)
        let whole = sealedAppend(sequence: 3, ["d", "e"])
        let result = scan(damaged + whole)
        let applied = result.commits.flatMap { $0.records.map(\.id) }
        // Today: applied == ["e"]; d's line is read together with the hole and set aside.
        #expect(applied == ["d", "e"] || applied.isEmpty, "commit 3 applied in part: \(applied)")
    }

    /// The same, end to end: a database opened on such a journal (a power cut in relaxed
    /// mode, or during the flush of the later append, can leave it) applies half a commit.
    @Test func aReaderNeverAppliesHalfACommitAfterAHole() async throws {
        let directory = try TemporaryDirectory("checksum-review-half")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        try JSONFileTestSupport.append(
            withHole(sealedAppend(sequence: 2, ["b", "c"]), line: 1) + sealedAppend(sequence: 3, ["d", "e"]),
            to: journal)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let ids = Set(try await reader.fetchAll(in: zone).records.map(\.id))
        // Today: ["a", "e"] -- record e of commit 3 without record d.
        #expect(ids.isSuperset(of: ["d", "e"]) || ids.isDisjoint(with: ["d", "e"]), "half of commit 3: \(ids.sorted())")
    }
}
