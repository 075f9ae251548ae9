import Foundation
@testable import MagicMirror
import Synchronization
import Testing

/// Reading a snapshot a piece at a time (`JSONFileFormat.readSnapshot`): whatever the
/// piece size, it gives what a read of the whole file gives, and a bad line, a read that
/// fails or a file that changes while it is read are handled as a whole read handles them.
@Suite(.timeLimit(.minutes(5))) struct JSONFileSnapshotReadingTests {
    let zone = ZoneID.public("Todo")
    typealias Contents = JSONFileFormat.SnapshotContents

    /// `count` records; every third one's fields are stored as text (escaped), so that
    /// both kinds of fields are read.
    static func records(_ count: Int) -> [StoredRecord] {
        let clock = HLCTimestamp(millis: 1_700_000_000_000)
        return (0..<count).map { number in
            let fields = number % 3 == 0
                ? Data("{\n  \"n\" : \(number),\n  \"text\" : \"\(String(repeating: "x", count: number))\"\n}".utf8)
                : Data("{\"n\":\(number),\"text\":\"\(String(repeating: "y", count: number * 2))\"}".utf8)
            return StoredRecord(id: "r\(number)", version: 1 + number % 4, fields: fields, modified: clock, writer: "w")
        }
    }

    /// A snapshot file of `records`, as compaction writes it, with the lines of the records
    /// at `damaged` replaced by one that does not decode.
    static func snapshot(_ records: [StoredRecord], damaged: Set<Int> = []) -> [UInt8] {
        var writer = JSONByteWriter()
        JSONFileFormat.appendSnapshotHeader(to: &writer, generation: 3, sequence: 42, count: records.count)
        for (index, record) in records.enumerated() {
            if damaged.contains(index) {
                writer.append("{\"id\":\"bad\",\"version\":oops}")
            } else {
                JSONFileFormat.appendSnapshotRecord(to: &writer, record: record)
            }
            writer.append(index == records.count - 1 ? "\n" : ",\n")
        }
        writer.append(JSONFileFormat.snapshotFooter)
        return writer.bytes
    }

    /// A snapshot's reading function over `bytes`, which fails with `failing(offset)` when
    /// that is not `nil`.
    static func reader(
        _ bytes: [UInt8], failing: @escaping @Sendable (Int) -> Int32? = { _ in nil }
    ) -> @Sendable (UnsafeMutableRawBufferPointer, Int) throws(FileSystem.Failure) -> Int {
        { buffer, offset throws(FileSystem.Failure) in
            if let code = failing(offset) { throw FileSystem.Failure(operation: .open, code: code) }
            let count = min(buffer.count, bytes.count - offset)
            for index in 0..<count { buffer[index] = bytes[offset + index] }
            return count
        }
    }

    /// Reads `bytes` in pieces of `pieceSize`, in parallel parts from `partsFrom` bytes,
    /// through a function that fails with `failing(offset)` when that is not `nil`.
    static func read(
        _ bytes: [UInt8], pieceSize: Int, partsFrom: Int = JSONFileFormat.snapshotSizeReadInParts,
        failing: @escaping @Sendable (Int) -> Int32? = { _ in nil }
    ) throws -> Contents {
        try JSONFileFormat.readSnapshot(
            size: bytes.count, pieceSize: pieceSize, partsFrom: partsFrom, read: reader(bytes, failing: failing))
    }

    /// Writes `bytes` to the file `name` in `directory` and calls `body` with a read-write
    /// descriptor of it, closed after.
    static func withFile<Result>(
        _ bytes: [UInt8], in directory: TemporaryDirectory, named name: String = "snapshot.json",
        _ body: (Int32) throws -> Result
    ) throws -> Result {
        let url = directory.url.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        let fd = open(url.path, O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        return try body(fd)
    }

    /// The offset of the line that starts with `prefix`.
    static func offset(of prefix: String, in bytes: [UInt8]) throws -> Int {
        let text = String(decoding: bytes, as: UTF8.self)
        let range = try #require(text.range(of: "\n" + prefix))
        return text.utf8.distance(from: text.startIndex, to: range.lowerBound) + 1
    }

    /// Whether two readings found the same: header, records (fields included) and bad lines.
    static func same(_ one: Contents, _ other: Contents) -> Bool {
        one.header?.generation == other.header?.generation && one.header?.sequence == other.header?.sequence
            && (one.header == nil) == (other.header == nil) && one.records == other.records
            && one.bad.map(\.offset) == other.bad.map(\.offset) && one.bad.map(\.bytes) == other.bad.map(\.bytes)
    }

    /// Every piece size from one byte to past the file's end puts a piece boundary at every
    /// offset of every line (the records, the header, a bad line and the last line), and
    /// gives lines longer than a piece: each reading is the whole file's.
    @Test func everyPieceSizeGivesWhatAWholeReadGives() throws {
        let records = Self.records(8)
        let bytes = Self.snapshot(records, damaged: [4])
        let whole = try Self.read(bytes, pieceSize: bytes.count)
        #expect(whole.header?.generation == 3 && whole.header?.sequence == 42)
        #expect(whole.records == records.enumerated().filter { $0.offset != 4 }.map(\.element))
        #expect(whole.bad.count == 1)
        for pieceSize in 1...(bytes.count + 1) {
            let pieces = try Self.read(bytes, pieceSize: pieceSize)
            #expect(Self.same(pieces, whole), "piece size \(pieceSize)")
        }
    }

    /// A line that does not decode in a later piece is set apart with its offset in the
    /// file and its bytes, newline included; the records around it keep their own fields.
    @Test func aBadLineInALaterPieceIsSetApartByteForByte() throws {
        let records = Self.records(40)
        let bytes = Self.snapshot(records, damaged: [30])
        let pieceSize = 256
        let lineStart = try Self.offset(of: #"{"id":"bad""#, in: bytes)
        #expect(lineStart > 2 * pieceSize, "the damaged line is past the first pieces")
        let contents = try Self.read(bytes, pieceSize: pieceSize)
        #expect(contents.records == records.enumerated().filter { $0.offset != 30 }.map(\.element))
        #expect(contents.bad.map(\.offset) == [lineStart])
        #expect(contents.bad.first?.bytes == Array("{\"id\":\"bad\",\"version\":oops},\n".utf8))
    }

    /// A file read in parallel parts (one per core, each from a line's start) gives what a
    /// read in order gives, whatever the records, the bad lines (one of them where the file
    /// is split) and the piece size; each part but the first starts just after a newline.
    @Test(arguments: [2, 7, 40, 300])
    func aFileReadInPartsGivesWhatAReadInOrderGives(count: Int) throws {
        let records = Self.records(count)
        let plain = Self.snapshot(records)
        let bounds = JSONFileFormat.partBounds(size: plain.count, from: 0, read: Self.reader(plain))
        let cores = BatchJSONCoding.processorCount
        #expect(bounds.first == 0 && bounds.last == plain.count && bounds.count <= cores + 1)
        if cores > 1 { #expect(bounds.count > 2, "a file of \(count) records is read in parts") }
        #expect(bounds.dropFirst().dropLast().allSatisfy { plain[$0 - 1] == 0x0A })
        // The record whose line holds the first split, and the first and last records.
        let split = bounds.count > 2 ? bounds[1] : plain.count / 2
        let lineAtSplit = (0..<count).first { (try? Self.offset(of: #"{"id":"r\#($0)""#, in: plain)) ?? 0 >= split } ?? 0
        for damaged in [Set<Int>(), [0, lineAtSplit, count - 1], [max(0, lineAtSplit - 1)]] {
            let bytes = Self.snapshot(records, damaged: damaged)
            let inOrder = try Self.read(bytes, pieceSize: bytes.count, partsFrom: .max)
            #expect(inOrder.records.count == count - damaged.count)
            for pieceSize in [64, 4_096, 1 << 20] {
                let inParts = try Self.read(bytes, pieceSize: pieceSize, partsFrom: 0)
                #expect(Self.same(inParts, inOrder), "damaged \(damaged), piece size \(pieceSize)")
            }
        }
    }

    /// Read in parts, a read that fails in a later part fails the whole read with its
    /// error, and an unknown format in the header stops it as a read in order does.
    @Test func aFailureInAnyPartFailsTheRead() throws {
        let bytes = Self.snapshot(Self.records(300))
        let laterPart = bytes.count / 2 + 1
        #expect {
            try Self.read(bytes, pieceSize: 256, partsFrom: 0) { $0 > laterPart ? EIO : nil }
        } throws: { error in
            guard case .read(let failure)? = error as? JSONFileFormat.SnapshotReadFailure else { return false }
            return failure.code == EIO
        }
        var unknown = bytes
        let format = Array(#""format":1"#.utf8)
        let at = try #require((0..<64).first { Array(unknown[$0..<($0 + format.count)]) == format })
        unknown[at + format.count - 1] = UInt8(ascii: "9")
        #expect {
            try Self.read(unknown, pieceSize: 256, partsFrom: 0)
        } throws: { error in
            guard case .problem(.unsupportedFormat(9))? = error as? JSONFileFormat.SnapshotReadFailure else { return false }
            return true
        }
    }

    /// A file that grows while it is read (bytes appended after the first piece) is read
    /// as it was when opened: what lies past its size then is not read.
    @Test func aFileThatGrowsWhileReadIsReadAsItWasOpened() throws {
        let directory = try TemporaryDirectory("snapshot-grows")
        defer { directory.remove() }
        let bytes = Self.snapshot(Self.records(30))
        let contents = try readChanging(bytes, in: directory, pieceSize: 200) { fd in
            var more = Array("{\"id\":\"late\",\"version\":1,\"fields\":{}}\n".utf8)
            #expect(pwrite(fd, &more, more.count, off_t(bytes.count)) == more.count)
        }
        #expect(Self.same(contents, try Self.read(bytes, pieceSize: bytes.count)))
        #expect(contents.records.count == 30)
    }

    /// A file that is cut short while it is read (after the first piece) is read to its new
    /// end, as a whole read of the shorter file would: the line cut in two is set apart.
    @Test func aFileThatShrinksWhileReadIsReadToItsNewEnd() throws {
        let directory = try TemporaryDirectory("snapshot-shrinks")
        defer { directory.remove() }
        let bytes = Self.snapshot(Self.records(30))
        let cut = try Self.offset(of: #"{"id":"r20""#, in: bytes) + 10
        let contents = try readChanging(bytes, in: directory, pieceSize: 200) { fd in
            #expect(ftruncate(fd, off_t(cut)) == 0)
        }
        let shorter = try Self.read(Array(bytes[..<cut]), pieceSize: cut)
        #expect(Self.same(contents, shorter))
        #expect(contents.records.map(\.id) == (0..<20).map { "r\($0)" })
        #expect(contents.bad.map(\.offset) == [cut - 10])
    }

    /// Writes `bytes` to a file and reads it in pieces through its descriptor, calling
    /// `change` with the descriptor after the first piece was read.
    private func readChanging(
        _ bytes: [UInt8], in directory: TemporaryDirectory, pieceSize: Int, change: @Sendable (Int32) -> Void
    ) throws -> Contents {
        try Self.withFile(bytes, in: directory) { fd in
            let reads = ReadCounter()
            return try JSONFileFormat.readSnapshot(size: bytes.count, pieceSize: pieceSize) { buffer, offset throws(FileSystem.Failure) in
                if reads.next() == 2 { change(fd) }
                return try JSONFileIO.read(fd, into: buffer, at: offset)
            }
        }
    }

    /// A read that fails in a later piece stops the reading with its error; an unknown
    /// format stops it at the header; an empty file is an empty snapshot of generation 0.
    @Test func aFailedReadAnUnknownFormatAndAnEmptyFile() throws {
        let bytes = Self.snapshot(Self.records(30))
        let reads = ReadCounter()
        #expect {
            try Self.read(bytes, pieceSize: 100) { _ in reads.next() == 3 ? EIO : nil }
        } throws: { error in
            guard case .read(let failure)? = error as? JSONFileFormat.SnapshotReadFailure else { return false }
            return failure.code == EIO
        }
        #expect(reads.count == 3)

        var future = Array(#"{"format":99,"generation":1,"sequence":1,"count":0,"records":["#.utf8)
        future += Array("\n]}\n".utf8)
        #expect {
            try Self.read(future, pieceSize: 8)
        } throws: { error in
            guard case .problem(.unsupportedFormat(99))? = error as? JSONFileFormat.SnapshotReadFailure else { return false }
            return true
        }

        let empty = try Self.read([], pieceSize: 8)
        #expect(empty.header?.generation == 0 && empty.header?.sequence == 0)
        #expect(empty.records.isEmpty && empty.bad.isEmpty)
    }

    /// The header's record count sizes the records array (the zone's table keeps it: not
    /// the up to twice as much that growing by appending leaves), but is only a hint: a
    /// count too large for the file, or one that is not a number, reads the records all
    /// the same.
    @Test func theHeaderCountSizesTheRecordsButIsOnlyAHint() throws {
        let records = Self.records(1_025)
        let exact = try Self.read(Self.snapshot(records), pieceSize: 4_096)
        #expect(exact.records == records)
        #expect(exact.records.capacity < 1_100, "room for the records counted, not for twice as many")

        let few = Array(Self.records(3))
        let body = Self.snapshot(few).drop { $0 != 0x0A }
        for count in ["1000000000000", "-1", "\"many\"", "1.5"] {
            let header = #"{"format":1,"generation":3,"sequence":42,"count":"# + count + #","records":["#
            let contents = try Self.read(Array(header.utf8) + body, pieceSize: 64)
            #expect(contents.header?.generation == 3 && contents.bad.isEmpty, "count \(count)")
            #expect(contents.records == few, "count \(count)")
            #expect(contents.records.capacity < 1_000, "count \(count)")
        }
    }

    /// A zone whose snapshot takes several pieces (more than a mebibyte) opens with every
    /// record's own fields, and a bad line in a later piece goes to quarantine byte for byte.
    @Test func aSnapshotOfManyPiecesOpensWithABadLineQuarantined() async throws {
        let directory = try TemporaryDirectory("snapshot-pieces")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let text = String(repeating: "z", count: 300)
        var saved: [String: Data] = [:]
        var operations: [RecordOperation] = []
        for number in 0..<5_000 {
            let id = "r\(number)"
            saved[id] = fields(["n": number, "text": text])
            operations.append(.save(id, fields: saved[id]!, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()))
        }
        try await db.commit(operations, to: zone)
        try await db.compact(zone)
        let zoneDirectory = db.directory(of: zone)
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        var bytes = try [UInt8](Data(contentsOf: snapshot))
        #expect(bytes.count > 2 * JSONFileFormat.snapshotPieceSize)
        // Damage the line that holds byte 1.5 MiB (its `version`), keeping its length.
        let middle = JSONFileFormat.snapshotPieceSize * 3 / 2
        let lineStart = try #require(bytes[..<middle].lastIndex(of: 0x0A)) + 1
        let lineEnd = try #require(bytes[middle...].firstIndex(of: 0x0A)) + 1
        let line = String(decoding: bytes[lineStart..<lineEnd], as: UTF8.self)
        let version = try #require(line.range(of: #""version":1"#))
        let damaged = line.replacingCharacters(in: version, with: #""version":x"#)
        bytes.replaceSubrange(lineStart..<lineEnd, with: Array(damaged.utf8))
        try Data(bytes).write(to: snapshot)
        let lostID = try #require(saved.keys.first { line.contains("\"id\":\"\($0)\"") })
        saved[lostID] = nil

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let fetched = try await reopened.fetchAll(in: zone)
        #expect(fetched.records.count == 4_999)
        #expect(fetched.records.allSatisfy { $0.fields == saved[$0.id] })
        let kept = JSONFileTestSupport.names(in: zoneDirectory).filter { $0.hasPrefix("quarantine-snapshot-") }
        #expect(kept.count == 1 && kept.allSatisfy { $0.hasSuffix("-\(lineStart).bad") }, "\(kept)")
        let quarantined = try kept.first.map { try Data(contentsOf: zoneDirectory.appendingPathComponent($0)) }
        #expect(quarantined == Data(damaged.utf8))
    }
}

/// Counts the reads of a snapshot (whose reading function may be called from several
/// threads).
final class ReadCounter: Sendable {
    private let state = Mutex(0)
    /// The number of reads so far.
    var count: Int { state.withLock { $0 } }
    /// Counts one more read and returns the count.
    func next() -> Int { state.withLock { $0 += 1; return $0 } }
}
