import Foundation
@testable import MagicMirror
import Testing

/// A load reads the journal a piece at a time, each from the end of the last complete
/// append read: whatever the piece size, it gives what a read of the whole journal gives,
/// damage included (bad lines, an append whose checksum does not match, a repeated
/// commit, an append larger than a piece, an unfinished append and reserved space at the
/// end).
@Suite(.timeLimit(.minutes(5))) struct JournalPiecesTests {
    let zone = ZoneID.public("Item")

    /// The bytes of one sealed append of records `ids` as commit `sequence`; each record's
    /// fields are `size` bytes or more.
    static func append(sequence: Int, _ ids: [String], size: Int = 40) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 256)
        for (index, id) in ids.enumerated() {
            let text = String(repeating: "t", count: size + (sequence * 7 + index) % 50)
            let record = StoredRecord(
                id: id, version: 1 + sequence % 3, fields: Data(#"{"id":"\#(id)","text":"\#(text)"}"#.utf8),
                modified: HLCTimestamp(millis: 1_763_703_120_000 + Int64(sequence), counter: UInt32(index)),
                writer: "w1-test")
            append.add(sequence: sequence, record: record, isLast: index == ids.count - 1)
        }
        return Array(append.sealed().joined())
    }

    /// A journal of 60 commits with damage between and inside them.
    static func damagedJournal() -> [UInt8] {
        var bytes: [UInt8] = []
        var sequence = 0
        func commit(_ ids: [String], size: Int = 40) -> [UInt8] {
            sequence += 1
            return append(sequence: sequence, ids, size: size)
        }
        for index in 0..<20 { bytes += commit((0...(index % 3)).map { "a\(index)-\($0)" }) }
        bytes += Array("this line is not JSON\n".utf8)
        // One append larger than most pieces.
        bytes += commit((0..<300).map { "big\($0)" }, size: 100)
        let repeated = commit(["r1", "r2"])
        bytes += repeated
        for index in 0..<10 { bytes += commit(["b\(index)"]) }
        bytes += repeated  // the same commit again: quarantined, not applied
        // An append whose checksum no longer matches (a byte changed), then a whole one:
        // the first is set aside.
        var changed = commit(["c1", "c2", "c3"])
        changed[changed.firstIndex(of: UInt8(ascii: "t"))!] = UInt8(ascii: "T")
        bytes += changed
        for index in 0..<27 { bytes += commit(["d\(index)", "a\(index % 20)-0"]) }
        // An unfinished append (no end line), then reserved space.
        let unfinished = append(sequence: sequence + 1, ["u1", "u2"])
        bytes += unfinished[..<(unfinished.lastIndex(of: UInt8(ascii: "\n"), before: unfinished.count - 1)! + 1)]
        bytes += [UInt8](repeating: UInt8(ascii: " "), count: 3000)
        return bytes
    }

    /// What a database in a copy of `directory` reads with pieces of `pieceSize` bytes: its
    /// records, its token, and its quarantine files with their bytes.
    static func load(
        _ directory: TemporaryDirectory, pieceSize: Int
    ) async throws -> (records: [StoredRecord], token: ChangeToken, quarantined: [String: Data]) {
        let copy = try TemporaryDirectory("pieces-copy")
        defer { copy.remove() }
        try FileManager.default.removeItem(at: copy.url)
        try FileManager.default.copyItem(at: directory.url, to: copy.url)
        let database = try JSONFileDatabase(isolatedDirectory: copy.url, journalPieceSize: pieceSize)
        let zone = ZoneID.public("Item")
        let records = try await database.fetchAll(in: zone).records.sorted { $0.id < $1.id }
        let token = try await database.currentToken(in: zone)
        let zoneDirectory = copy.url.appendingPathComponent("public/Item")
        var quarantined: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: zoneDirectory.path)
        where name.hasPrefix("quarantine-") {
            quarantined[name] = try Data(contentsOf: zoneDirectory.appendingPathComponent(name))
        }
        return (records, token, quarantined)
    }

    /// A database in `directory` whose zone `Item` holds `journal` alone.
    static func database(in directory: TemporaryDirectory, withJournal journal: [UInt8]) throws {
        _ = try JSONFileDatabase(isolatedDirectory: directory.url)
        let zoneDirectory = directory.url.appendingPathComponent("public/Item")
        try FileManager.default.createDirectory(at: zoneDirectory, withIntermediateDirectories: true)
        try Data(journal).write(to: zoneDirectory.appendingPathComponent("journal-0.ndjson"))
    }

    @Test func everyPieceSizeGivesWhatAWholeReadGives() async throws {
        let directory = try TemporaryDirectory("pieces")
        defer { directory.remove() }
        let journal = Self.damagedJournal()
        try Self.database(in: directory, withJournal: journal)

        let whole = try await Self.load(directory, pieceSize: .max)
        #expect(whole.records.count > 300, "the large append is applied")
        #expect(whole.records.contains { $0.id == "d26" } && !whole.records.contains { $0.id == "u1" })
        #expect(!whole.records.contains { $0.id == "c1" }, "the changed append is not applied")
        #expect(whole.quarantined.count >= 3, "the bad line, the repeated commit and the changed append")

        for pieceSize in [1, 37, 500, 4096, 20_000, journal.count - 1] {
            let pieces = try await Self.load(directory, pieceSize: pieceSize)
            #expect(pieces.records == whole.records, "pieces of \(pieceSize) bytes")
            #expect(pieces.token == whole.token, "pieces of \(pieceSize) bytes")
            #expect(pieces.quarantined == whole.quarantined, "pieces of \(pieceSize) bytes")
        }
    }

    /// A journal larger than `FieldsSpill.sizeSpilled`, read in pieces smaller than that:
    /// its fields are spilled all the same (the decision is the whole journal's).
    #if os(Linux)
    @Test func aLargeJournalReadInPiecesIsSpilled() async throws {
        let directory = try TemporaryDirectory("pieces-spill")
        defer { directory.remove() }
        var journal: [UInt8] = []
        var sequence = 0
        while journal.count < FieldsSpill.sizeSpilled + 100_000 {
            sequence += 1
            journal += Self.append(sequence: sequence, (0..<50).map { "s\(sequence)-\($0)" }, size: 200)
        }
        try Self.database(in: directory, withJournal: journal)

        let database = try JSONFileDatabase(isolatedDirectory: directory.url, journalPieceSize: 1 << 20)
        let records = try await database.fetchAll(in: zone).records
        #expect(records.count == sequence * 50)
        let ranges = MappedBytes.ranges
        #expect(records.allSatisfy { FieldsSpillTests.isMapped($0.fields!, in: ranges) })
    }
    #endif
}

extension Array where Element: Equatable {
    /// The last index of `element` before `end`.
    fileprivate func lastIndex(of element: Element, before end: Int) -> Int? {
        self[..<end].lastIndex(of: element)
    }
}
