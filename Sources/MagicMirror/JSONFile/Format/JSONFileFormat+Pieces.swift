import Foundation

/// Reading a file a piece at a time, for snapshots and journals: one piece of the file is in
/// memory at once, not the whole file beside what is kept of it.
extension JSONFileFormat {
    /// Reads `size` bytes into one buffer a piece at a time and hands each piece to
    /// `consume`. The bytes it does not use start the next piece; when it uses none of a full
    /// buffer (a line, or an append, longer than the buffer), the buffer doubles.
    ///
    /// - Parameters:
    ///   - size: How many bytes to read: the file's size when it was opened, so that a file
    ///     that grows while it is read is read as it was; one that ends sooner is read to its
    ///     end, as a whole read of it would have been.
    ///   - pieceSize: The buffer's first size.
    ///   - read: Reads the file's bytes from an offset into a buffer, filling it unless the
    ///     file ends first, and returns how many it read.
    ///   - consume: Given the piece (`count` bytes at `base`), the offset of its first byte
    ///     and whether it reaches the end, returns how many of its bytes it used, or `nil` to
    ///     stop reading.
    /// - Returns: Where the bytes ended (`size`, or less when the file was shorter).
    /// - Throws: What `read` throws.
    static func readInPieces(
        size: Int, pieceSize: Int,
        read: (_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int) throws(FileSystem.Failure) -> Int,
        consume: (_ base: UnsafePointer<UInt8>, _ count: Int, _ offset: Int, _ isEnd: Bool) -> Int?
    ) throws(FileSystem.Failure) -> Int {
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(pieceSize, 1), alignment: 1)
        defer { buffer.deallocate() }
        var offset = 0  // the file offset of the buffer's first byte
        var filled = 0
        var end = size
        while true {
            let wanted = min(buffer.count - filled, end - offset - filled)
            if wanted > 0 {
                let got = try read(UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<(filled + wanted)]), offset + filled)
                filled += got
                if got < wanted { end = offset + filled }
            }
            let isEnd = offset + filled >= end
            let base = UnsafePointer(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
            guard let used = consume(base, filled, offset, isEnd), !isEnd else { return end }
            if used == 0 {
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 1)
                larger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                buffer.deallocate()
                buffer = larger
            } else {
                buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + used, byteCount: filled - used)
                offset += used
                filled -= used
            }
        }
    }
}

extension JSONFileFormat {
    /// How many bytes of a journal are read at a time at first (the buffer grows to hold
    /// the largest append).
    static let journalPieceSize = 1 << 20

    /// A stretch of journal read a piece at a time.
    struct JournalRead {
        /// What ``scanJournal(_:count:after:parser:)`` finds in the whole stretch.
        var scan = JournalScan()
        /// What ``dataEnd(_:count:)`` finds in the whole stretch, or less where that is
        /// still at most `scan.consumed`.
        var dataEnd = 0
        /// The bytes of each line the scan left out (its `bad`, `setAside` and `repeated`),
        /// by offset.
        var leftOut: [Int: [UInt8]] = [:]
    }

    /// Scans `size` bytes of journal a piece at a time: only the appends being read and the
    /// fields copied out of them are in memory, not the whole stretch beside them. Each
    /// piece is scanned through its last line that may end an append (`"end"`); the bytes
    /// after the last complete append start the next piece.
    ///
    /// - Parameters:
    ///   - size: How many bytes to read (see ``readInPieces(size:pieceSize:read:consume:)``).
    ///   - pieceSize: The buffer's first size (tests use tiny ones).
    ///   - sequence: What the reader has applied already (see `scanJournal`).
    ///   - read: Reads the stretch's bytes from an offset into a buffer (see
    ///     ``readInPieces(size:pieceSize:read:consume:)``).
    /// - Throws: What `read` throws.
    static func readJournal(
        size: Int, pieceSize: Int = journalPieceSize, after sequence: Int,
        read: (_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int) throws(FileSystem.Failure) -> Int
    ) throws(FileSystem.Failure) -> JournalRead {
        var result = JournalRead()
        var parser = LineParser()
        var highest = sequence
        _ = try readInPieces(size: size, pieceSize: pieceSize, read: read) { base, count, offset, isEnd in
            let stretch = isEnd ? count : endOfLastEndLine(base, count: count)
            guard stretch > 0 || isEnd else { return 0 }
            let piece = scanJournal(base, count: stretch, after: highest, parser: &parser)
            func keep(_ start: Int, _ length: Int) {
                result.leftOut[offset + start] = Array(UnsafeBufferPointer(start: base + start, count: length))
            }
            for bad in piece.bad {
                keep(bad.offset, bad.length)
                result.scan.bad.append((offset + bad.offset, bad.length))
            }
            for line in piece.setAside {
                keep(line.offset, line.length)
                result.scan.setAside.append((offset + line.offset, line.length))
            }
            for repeated in piece.repeated {
                keep(repeated.offset, repeated.length)
                result.scan.repeated.append((offset + repeated.offset, repeated.length, repeated.sequence))
            }
            if let last = piece.commits.last { highest = max(highest, last.sequence) }
            result.scan.commits.append(contentsOf: piece.commits)
            result.scan.orphaned = result.scan.orphaned || piece.orphaned
            // The piece starts where the last complete append before it ended.
            result.scan.consumed = offset + piece.consumed
            if isEnd { result.dataEnd = offset + dataEnd(base, count: count) }
            return piece.consumed
        }
        return result
    }

    /// The offset past the newline of the last complete line in `count` bytes that holds
    /// `"end"` (a line that may end an append), or 0 when there is none.
    static func endOfLastEndLine(_ base: UnsafePointer<UInt8>, count: Int) -> Int {
        var index = count - 5
        while index >= 0 {
            if base[index] == UInt8(ascii: "\""), base[index + 1] == UInt8(ascii: "e"),
               base[index + 2] == UInt8(ascii: "n"), base[index + 3] == UInt8(ascii: "d"),
               base[index + 4] == UInt8(ascii: "\""),
               let newline = memchr(base + index, 0x0A, count - index) {
                return UnsafePointer<UInt8>(newline.assumingMemoryBound(to: UInt8.self)) - base + 1
            }
            index -= 1
        }
        return 0
    }
}
