import Foundation
@testable import MagicMirror
import Synchronization
import Testing

/// Attacks on a snapshot read in parallel parts (`JSONFileFormat.readSnapshot` with
/// `partsFrom`): whatever the bytes at the split, the line ends, a read that fails or a
/// file that changes while it is read, it gives what a read in order (`partsFrom: .max`)
/// gives.
@Suite(.timeLimit(.minutes(5))) struct JSONFileSnapshotPartsTests {
    typealias Contents = JSONFileFormat.SnapshotContents
    typealias Reading = JSONFileSnapshotReadingTests

    /// The snapshot failure a reading throws, `nil` when it throws none.
    static func failure(_ reading: () throws -> Contents) -> JSONFileFormat.SnapshotReadFailure? {
        do {
            _ = try reading()
            return nil
        } catch {
            return error as? JSONFileFormat.SnapshotReadFailure
        }
    }

    /// A snapshot whose header carries `pad` bytes of an unknown key (so the split falls at
    /// another byte of the lines for each `pad`), with `lineEnd` after every line, blank
    /// lines between some records, and the lines of `damaged` records that do not decode.
    static func snapshot(
        _ records: [StoredRecord], pad: Int, lineEnd: String = "\n", blankEvery: Int = 0, damaged: Set<Int> = []
    ) -> [UInt8] {
        var writer = JSONByteWriter()
        let padding = String(repeating: "p", count: pad)
        writer.bytes += Array(#"{"format":\#(JSONFileFormat.version),"generation":3,"sequence":42,"pad":"\#(padding)","records":["#.utf8)
        writer.bytes += Array(lineEnd.utf8)
        for (index, record) in records.enumerated() {
            if blankEvery > 0, index % blankEvery == 0 { writer.bytes += Array(lineEnd.utf8) }
            if damaged.contains(index) {
                writer.append("{\"id\":\"bad\",\"version\":oops}")
            } else {
                JSONFileFormat.appendSnapshotRecord(to: &writer, record: record)
            }
            writer.bytes += Array(((index == records.count - 1 ? "" : ",") + lineEnd).utf8)
        }
        writer.bytes += Array(("]}" + lineEnd).utf8)
        return writer.bytes
    }

    /// The split moves across every byte of the lines around it (the header's padding shifts
    /// the lines by twice as much as the split), with LF and CRLF line ends, blank lines and a
    /// bad line: each reading in parts is the reading in order.
    @Test(arguments: ["\n", "\r\n"])
    func aSplitAtEveryByteOfALineGivesWhatAReadInOrderGives(lineEnd: String) throws {
        let records = Reading.records(24)
        for pad in 0..<300 {
            let bytes = Self.snapshot(records, pad: pad, lineEnd: lineEnd, blankEvery: 5, damaged: [11, 12])
            let inOrder = try Reading.read(bytes, pieceSize: bytes.count, partsFrom: .max)
            #expect(inOrder.records.count == 22 && inOrder.bad.count == 2 && inOrder.header?.sequence == 42)
            for pieceSize in [7, 1 << 20] {
                let inParts = try Reading.read(bytes, pieceSize: pieceSize, partsFrom: 0)
                #expect(Reading.same(inParts, inOrder), "pad \(pad), piece size \(pieceSize)")
            }
        }
    }

    /// The closing `]}` line at the split, a last line cut short (no newline, torn), a file
    /// of only a header, and a header longer than a part (or than the window a split looks
    /// for a newline in): each read in parts is the read in order.
    @Test func theEndsOfAFileAndALongHeaderGiveWhatAReadInOrderGives() throws {
        let records = Reading.records(6)
        let whole = Self.snapshot(records, pad: 0)
        var files: [(String, [UInt8])] = []
        // The closing line is in the second half: cut the records until the split falls on it.
        for kept in 0...records.count {
            files.append(("\(kept) records", Self.snapshot(Array(records.prefix(kept)), pad: 0)))
        }
        for cut in stride(from: whole.count - 1, to: whole.count - 90, by: -1) {
            files.append(("cut at \(cut)", Array(whole[..<cut])))
        }
        // A header that ends around the split: the first part is the header alone, or more.
        for pad in 900...1_100 { files.append(("a header of pad \(pad)", Self.snapshot(records, pad: pad))) }
        files.append(("a long header", Self.snapshot(records, pad: 200_000)))
        files.append(("a long header line alone", Self.snapshot([], pad: 200_000)))
        files.append(("a long record at the split", Self.snapshot(Reading.records(2) + [
            StoredRecord(
                id: "long", version: 1, fields: Data(#"{"text":"\#(String(repeating: "z", count: 300_000))"}"#.utf8),
                modified: HLCTimestamp(millis: 1), writer: "w")
        ] + Reading.records(3), pad: 0)))
        files.append(("one line without a newline", Array(#"{"format":1,"generation":2,"sequence":3,"records":["#.utf8)))
        files.append(("a newline alone", [0x0A]))
        files.append(("two newlines", [0x0A, 0x0A]))
        for (name, bytes) in files {
            let inOrder = try Reading.read(bytes, pieceSize: 1 << 20, partsFrom: .max)
            for pieceSize in [5, 1 << 20] {
                let inParts = try Reading.read(bytes, pieceSize: pieceSize, partsFrom: 0)
                #expect(Reading.same(inParts, inOrder), "\(name), piece size \(pieceSize)")
            }
        }
    }

    /// A read that fails where the file is split (found before the parts are read) does
    /// not hide what a read in order meets first: an unknown format in the header, or a
    /// read that fails earlier in the file.
    @Test func aFailedReadAtTheSplitReportsWhatAReadInOrderMeetsFirst() throws {
        try #require(BatchJSONCoding.processorCount > 1, "one core reads a file in one part")
        var bytes = Reading.snapshot(Reading.records(300))
        let split = bytes.count / BatchJSONCoding.processorCount
        // Reads from the first split on fail with ENXIO.
        let laterFails: @Sendable (Int) -> Int32? = { $0 >= split ? ENXIO : nil }
        let format = Array(#""format":1"#.utf8)
        let at = try #require((0..<64).first { Array(bytes[$0..<($0 + format.count)]) == format })
        var unknown = bytes
        unknown[at + format.count - 1] = UInt8(ascii: "9")
        let inOrder = Self.failure { try Reading.read(unknown, pieceSize: 256, partsFrom: .max, failing: laterFails) }
        guard case .problem(.unsupportedFormat(9))? = inOrder else {
            Issue.record("a read in order stops at the header: \(String(describing: inOrder))")
            return
        }
        let inParts = Self.failure { try Reading.read(unknown, pieceSize: 256, partsFrom: 0, failing: laterFails) }
        guard case .problem(.unsupportedFormat(9))? = inParts else {
            Issue.record("a read in parts gives \(String(describing: inParts)), not the unknown format")
            return
        }
        // Reads past the first piece fail with EIO before the split, ENXIO from it.
        let earlierFails: @Sendable (Int) -> Int32? = { $0 >= split ? ENXIO : $0 >= 256 ? EIO : nil }
        bytes = Reading.snapshot(Reading.records(300))
        Self.expectBothReadsFail(bytes, with: EIO, failing: earlierFails)
    }

    /// Expects a read in order and a read in parts of `bytes` (through `failing`) to fail
    /// with the read failure `code`.
    static func expectBothReadsFail(
        _ bytes: [UInt8], with code: Int32, failing: @escaping @Sendable (Int) -> Int32?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for partsFrom in [Int.max, 0] {
            let failure = Self.failure { try Reading.read(bytes, pieceSize: 256, partsFrom: partsFrom, failing: failing) }
            guard case .read(let read)? = failure else {
                Issue.record("parts from \(partsFrom): \(String(describing: failure))", sourceLocation: sourceLocation)
                continue
            }
            #expect(read.code == code, "parts from \(partsFrom): the first failure in the file's order", sourceLocation: sourceLocation)
        }
    }

    /// A read that fails in several parts reports the one first in the file's order, as a
    /// read in order does.
    @Test func failuresInSeveralPartsReportTheFirstInTheFilesOrder() throws {
        let bytes = Reading.snapshot(Reading.records(300))
        let split = bytes.count / max(2, BatchJSONCoding.processorCount)
        // The split's own search reads a window at the split: let it through, fail past it.
        let fails: @Sendable (Int) -> Int32? = { offset in
            offset > split + 1_000 ? ENXIO : offset > 512 && offset < split ? EIO : nil
        }
        Self.expectBothReadsFail(bytes, with: EIO, failing: fails)
    }

    /// A real file emptied (ftruncate to 0) once the split was found, before the parts read
    /// it: a read in order of a file that ends at once is an empty snapshot of generation 0,
    /// and so is the read in parts (not a snapshot whose header could not be read).
    @Test func aFileEmptiedAfterItsSplitWasFoundIsAnEmptySnapshot() throws {
        try #require(BatchJSONCoding.processorCount > 1, "one core reads a file in one part")
        let directory = try TemporaryDirectory("review8-emptied")
        defer { directory.remove() }
        let bytes = Reading.snapshot(Reading.records(300))
        let contents = try Reading.withFile(bytes, in: directory) { fd in
            let reads = ReadCounter()
            return try JSONFileFormat.readSnapshot(size: bytes.count, pieceSize: 256, partsFrom: 0) {
                buffer, offset throws(FileSystem.Failure) in
                let got = try JSONFileIO.read(fd, into: buffer, at: offset)
                // The first read is the search for the first split, past the header.
                if reads.next() == 1 {
                    #expect(offset > 0)
                    #expect(ftruncate(fd, 0) == 0)
                }
                return got
            }
        }
        let empty = try Reading.read([], pieceSize: 256, partsFrom: .max)
        #expect(empty.header?.generation == 0 && empty.header?.sequence == 0)
        #expect(Reading.same(contents, empty), "header \(String(describing: contents.header)), \(contents.records.count) records")
    }

    /// A real file that grows (a line appended) while its parts are read is read as it was
    /// opened, and one cut inside the second part is read to its new end; both as a read in
    /// order of the same file does.
    @Test(arguments: [false, true])
    func aRealFileChangedWhileReadInPartsGivesWhatAReadInOrderGives(cut: Bool) throws {
        let directory = try TemporaryDirectory("review8-changed")
        defer { directory.remove() }
        let bytes = Reading.snapshot(Reading.records(300))
        let cutAt = bytes.count - bytes.count / 4 - 3
        func readChanging(partsFrom: Int) throws -> Contents {
            try Reading.withFile(bytes, in: directory, named: "snapshot-\(partsFrom).json") { fd in
                let changed = Mutex(false)
                return try JSONFileFormat.readSnapshot(size: bytes.count, pieceSize: 256, partsFrom: partsFrom) {
                    buffer, offset throws(FileSystem.Failure) in
                    changed.withLock { done in
                        guard !done else { return }
                        done = true
                        if cut {
                            #expect(ftruncate(fd, off_t(cutAt)) == 0)
                        } else {
                            var more = Array("{\"id\":\"late\",\"version\":1,\"fields\":{}}\n".utf8)
                            #expect(pwrite(fd, &more, more.count, off_t(bytes.count)) == more.count)
                        }
                    }
                    return try JSONFileIO.read(fd, into: buffer, at: offset)
                }
            }
        }
        let inOrder = try readChanging(partsFrom: .max)
        let inParts = try readChanging(partsFrom: 0)
        #expect(Reading.same(inParts, inOrder))
        if cut {
            #expect(inOrder.bad.count == 1 && inOrder.records.count < 300)
        } else {
            #expect(inOrder.records.count == 300 && inOrder.bad.isEmpty)
        }
    }

    /// A file of exactly ``JSONFileFormat/snapshotSizeReadInParts`` bytes is read in parts
    /// (its first read looks for a split, past the file's start), one byte shorter in order;
    /// both give what a read in order gives.
    @Test func aFileAtTheThresholdIsReadInPartsOneByteLessInOrder() throws {
        try #require(BatchJSONCoding.processorCount > 1, "one core reads a file in one part")
        let threshold = JSONFileFormat.snapshotSizeReadInParts
        var base = Reading.snapshot(Reading.records(2_000))
        // Pad the header so the file is exactly `threshold` bytes, then one byte less.
        let header = Array(#""records":["#.utf8)
        let at = try #require((0..<200).first { Array(base[$0..<($0 + header.count)]) == header })
        let padding = Array(#""pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "p"), count: threshold - base.count - 9)
            + Array(#"","#.utf8)
        base.insert(contentsOf: padding, at: at)
        try #require(base.count == threshold)
        var shorter = base
        shorter.remove(at: at + 7)
        for (bytes, inParts) in [(base, true), (shorter, false)] {
            let first = Mutex<Int?>(nil)
            let contents = try JSONFileFormat.readSnapshot(size: bytes.count) { buffer, offset throws(FileSystem.Failure) in
                first.withLock { if $0 == nil { $0 = offset } }
                let count = min(buffer.count, bytes.count - offset)
                bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)])) }
                return count
            }
            #expect((first.withLock { $0 } != 0) == inParts, "\(bytes.count) bytes")
            #expect(contents.records.count == 2_000 && contents.bad.isEmpty && contents.header?.sequence == 42)
        }
    }

    #if canImport(Glibc)
    /// A read in parts that fails in a later part (after the first part read its records,
    /// and the failing part some of its own) frees every part's fields: repeated, the process
    /// does not grow by the buffers (1 MiB each) the parts copied fields into.
    @Test func aReadInPartsThatFailsInOnePartFreesEveryPartsFields() throws {
        try #require(BatchJSONCoding.processorCount > 1, "one core reads a file in one part")
        let bytes = Reading.snapshot(Reading.records(60))
        let split = bytes.count / BatchJSONCoding.processorCount
        let rounds = 400
        let grown = (0..<3).map { _ in
            let before = SnapshotReadFailureLeakTests.allocated()
            for _ in 0..<rounds {
                let failure = Self.failure {
                    try Reading.read(bytes, pieceSize: 256, partsFrom: 0) { $0 > split + 600 ? EIO : nil }
                }
                if case .read? = failure {} else { Issue.record("the read did not fail: \(String(describing: failure))") }
            }
            return SnapshotReadFailureLeakTests.allocated() - before
        }.min() ?? 0
        #expect(grown < (rounds / 2) << 20, "\(grown) bytes still mapped after \(rounds) failed reads")
    }
    #endif
}
