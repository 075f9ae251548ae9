import Foundation
@testable import MagicMirror
import Testing

/// Reading a journal a piece at a time (`JSONFileFormat.readJournal`): whatever the piece
/// size, it finds what a scan of the whole stretch finds, with the bytes of every line it
/// leaves out.
@Suite struct JSONFileJournalReadingTests {
    let zone = ZoneID.public("Todo")

    static func record(_ id: String, _ number: Int) -> StoredRecord {
        StoredRecord(
            id: id, version: 1, fields: Data("{\"n\":\(number),\"text\":\"\(String(repeating: "t", count: number))\"}".utf8),
            modified: HLCTimestamp(millis: 1_700_000_000_000 + Int64(number)), writer: "w")
    }

    /// One sealed append of the commits `(sequence, record ids)`.
    static func append(_ commits: [(Int, [String])]) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 1_024)
        for (commitIndex, (sequence, ids)) in commits.enumerated() {
            for (index, id) in ids.enumerated() {
                let isLast = commitIndex == commits.count - 1 && index == ids.count - 1
                append.add(sequence: sequence, record: record(id, sequence * 10 + index), isLast: isLast)
            }
        }
        return append.sealed()
    }

    /// A journal with several appends, a line that does not decode, a repeated commit, an
    /// append damaged in place before a good one (one line set apart, the damaged one bad),
    /// a torn tail and a reserved tail of spaces.
    static func journal() -> [UInt8] {
        var bytes = append([(1, ["a", "b", "c"])])
        bytes += append([(2, ["d"]), (3, ["e", "f"])])
        bytes += Array("{\"seq\":4,\"op\":\"save\",oops}\n".utf8)
        bytes += append([(4, ["g"])])
        bytes += append([(3, ["h"])])
        var damaged = append([(5, ["i", "j"])])
        damaged[damaged.count / 2] = UInt8(ascii: "Z")
        bytes += damaged
        bytes += append([(6, ["k"])])
        bytes += append([(7, ["l", "m"])]).dropLast(20)
        bytes += [UInt8](repeating: JSONFileFormat.reservedByte, count: 100)
        return bytes
    }

    static func read(_ bytes: [UInt8], pieceSize: Int, after sequence: Int = 0) throws -> JSONFileFormat.JournalRead {
        try JSONFileFormat.readJournal(size: bytes.count, pieceSize: pieceSize, after: sequence) { buffer, offset in
            let count = min(buffer.count, bytes.count - offset)
            for index in 0..<count { buffer[index] = bytes[offset + index] }
            return count
        }
    }

    /// Every piece size from one byte to past the end puts piece boundaries at every
    /// offset of every line and append: each reading finds the whole scan's commits, bad,
    /// set-apart and repeated lines (with their bytes), consumed bytes and end of data.
    @Test func everyPieceSizeFindsWhatAWholeScanFinds() throws {
        let bytes = Self.journal()
        var parser = JSONFileFormat.LineParser()
        let (whole, dataEnd) = bytes.withUnsafeBufferPointer { buffer in
            (JSONFileFormat.scanJournal(buffer.baseAddress!, count: buffer.count, after: 0, parser: &parser),
             JSONFileFormat.dataEnd(buffer.baseAddress!, count: buffer.count))
        }
        #expect(whole.commits.map(\.sequence) == [1, 2, 3, 4, 6])
        #expect(whole.bad.count == 2 && whole.repeated.count == 1 && whole.setAside.count == 1 && whole.orphaned,
                "bad \(whole.bad.count), repeated \(whole.repeated.count), set aside \(whole.setAside.count)")
        #expect(whole.consumed < dataEnd, "a torn tail follows the last complete append")
        let leftOut = (whole.bad.map { ($0.offset, $0.length) } + whole.setAside.map { ($0.offset, $0.length) }
            + whole.repeated.map { ($0.offset, $0.length) })
        for pieceSize in 1...(bytes.count + 1) {
            let read = try Self.read(bytes, pieceSize: pieceSize)
            let scan = read.scan
            #expect(scan.commits.map(\.sequence) == whole.commits.map(\.sequence), "piece size \(pieceSize)")
            #expect(scan.commits.map(\.records) == whole.commits.map(\.records), "piece size \(pieceSize)")
            #expect(scan.bad.map(\.offset) == whole.bad.map(\.offset) && scan.bad.map(\.length) == whole.bad.map(\.length))
            #expect(scan.setAside.map(\.offset) == whole.setAside.map(\.offset)
                && scan.setAside.map(\.length) == whole.setAside.map(\.length), "piece size \(pieceSize)")
            #expect(scan.repeated.map(\.offset) == whole.repeated.map(\.offset)
                && scan.repeated.map(\.sequence) == whole.repeated.map(\.sequence), "piece size \(pieceSize)")
            #expect(scan.orphaned == whole.orphaned && scan.consumed == whole.consumed, "piece size \(pieceSize)")
            #expect(max(scan.consumed, read.dataEnd) == max(whole.consumed, dataEnd), "piece size \(pieceSize)")
            for (offset, length) in leftOut {
                #expect(read.leftOut[offset] == Array(bytes[offset..<(offset + length)]), "piece size \(pieceSize)")
            }
        }
        // Commits at or below what the reader applied already are repeated, in pieces too.
        let later = try Self.read(bytes, pieceSize: 64, after: 3)
        #expect(later.scan.commits.map(\.sequence) == [4, 6])
        #expect(later.scan.repeated.map(\.sequence) == [1, 2, 3, 3] || later.scan.repeated.map(\.sequence) == [1, 3, 3])
    }

    /// A zone whose journal takes several pieces (more than a mebibyte, in appends of
    /// 1,000 records) opens with every record's own fields, and a line that does not decode
    /// in a later piece goes to quarantine byte for byte.
    @Test func aJournalOfManyPiecesOpensWithABadLineQuarantined() async throws {
        let directory = try TemporaryDirectory("journal-pieces")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url, options: .init(durability: .relaxed, compactionThreshold: .max))
        let text = String(repeating: "z", count: 300)
        var saved: [String: Data] = [:]
        for batch in 0..<5 {
            var operations: [RecordOperation] = []
            for number in (batch * 1_000)..<((batch + 1) * 1_000) {
                let id = "r\(number)"
                saved[id] = fields(["n": number, "text": text])
                operations.append(.save(id, fields: saved[id]!, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()))
            }
            try await db.commit(operations, to: zone)
        }
        let journal = try JSONFileTestSupport.journal(in: db.directory(of: zone))
        var bytes = try [UInt8](Data(contentsOf: journal))
        #expect(bytes.count > 2 * JSONFileFormat.journalPieceSize)
        // A line that does not decode, between two appends past the first piece.
        let middle = JSONFileFormat.journalPieceSize * 3 / 2
        let appendEnd = try #require(bytes[middle...].firstRange(of: Array("\"end\":true".utf8)))
        let lineEnd = try #require(bytes[appendEnd.upperBound...].firstIndex(of: 0x0A)) + 1
        let bad = Array("{\"seq\":99,oops}\n".utf8)
        bytes.insert(contentsOf: bad, at: lineEnd)
        try Data(bytes).write(to: journal)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url, options: .init(durability: .relaxed, compactionThreshold: .max))
        let fetched = try await reopened.fetchAll(in: zone)
        #expect(fetched.records.count == 5_000)
        #expect(fetched.records.allSatisfy { $0.fields == saved[$0.id] })
        let zoneDirectory = reopened.directory(of: zone)
        let kept = JSONFileTestSupport.names(in: zoneDirectory).filter { $0.hasPrefix("quarantine-journal-") }
        #expect(kept.count == 1 && kept.allSatisfy { $0.hasSuffix("-\(lineEnd).bad") }, "\(kept)")
        let quarantined = try kept.first.map { try Data(contentsOf: zoneDirectory.appendingPathComponent($0)) }
        #expect(quarantined == Data(bad))
    }
}
