import Foundation

/// Reading snapshots, line by line, with the bad lines set apart.
extension JSONFileFormat {
    /// What a snapshot holds.
    struct SnapshotContents {
        /// `nil` when the header line could not be read.
        var header: (generation: Int, sequence: Int)?
        var records: [StoredRecord] = []
        /// Lines that do not decode: their offset and bytes (newline included).
        var bad: [(offset: Int, bytes: [UInt8])] = []
    }

    /// Why a snapshot cannot be used at all.
    enum SnapshotProblem: Error {
        /// The snapshot says it is in a format version this library does not know.
        case unsupportedFormat(Int)
    }

    /// Why reading a snapshot stopped.
    enum SnapshotReadFailure: Error {
        /// The file could not be read.
        case read(FileSystem.Failure)
        /// What was read cannot be used (see ``SnapshotProblem``).
        case problem(SnapshotProblem)
    }

    /// How many bytes of a snapshot file are read at a time (more for a longer line). Only
    /// one piece of the file is in memory at a time, beside the fields copied out of it,
    /// instead of the whole file while its fields are copied.
    static let snapshotPieceSize = 1 << 20

    /// Reads the bytes of a whole snapshot file; an empty file is an empty snapshot of
    /// generation 0.
    static func parseSnapshot(_ bytes: [UInt8]) -> Result<SnapshotContents, SnapshotProblem> {
        do throws(SnapshotReadFailure) {
            return .success(try readSnapshot(size: bytes.count) { buffer, offset in
                let count = min(buffer.count, bytes.count - offset)
                bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)])) }
                return count
            })
        } catch {
            switch error {
            case .problem(let problem): return .failure(problem)
            case .read: fatalError("reading an array does not fail")
            }
        }
    }

    /// From this size on, a snapshot is read in parallel parts (one per core): its lines are
    /// independent, and reading one is most of the time of opening a large zone that the
    /// decoding of its records, already in parallel, does not take.
    static let snapshotSizeReadInParts = 4 << 20

    /// Reads a snapshot piece by piece; an empty file is an empty snapshot of generation 0.
    ///
    /// A large file (``snapshotSizeReadInParts``) is read in one part per core, each from a
    /// line's start, in parallel; the parts' records and bad lines are joined in the file's
    /// order, so the result is the one a read in order gives.
    ///
    /// - Parameters:
    ///   - size: The file's size when it was opened. Bytes past it are not read, so a file
    ///     that grows while it is read is read as it was; one that ends sooner is read to
    ///     its end, as a whole read of it would have been.
    ///   - pieceSize: How many bytes to read at a time (``snapshotPieceSize``; tests use
    ///     tiny pieces). A line longer than a piece is read whole all the same.
    ///   - partsFrom: The size from which the file is read in parallel parts (tests use a
    ///     small one).
    ///   - spill: Where the records' fields go once read (``FieldsSpill``), or `nil` to keep
    ///     them in memory.
    ///   - read: Reads the file's bytes from an offset into a buffer, filling it unless the
    ///     file ends first, and returns how many it read. Called from several threads at once
    ///     for a file read in parts.
    /// - Throws: ``SnapshotReadFailure/read(_:)`` when `read` fails,
    ///   ``SnapshotReadFailure/problem(_:)`` for an unknown format version.
    static func readSnapshot(
        size: Int, pieceSize: Int = snapshotPieceSize, partsFrom: Int = snapshotSizeReadInParts,
        spill: FieldsSpill.Target? = nil,
        read: @Sendable (_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int) throws(FileSystem.Failure) -> Int
    ) throws(SnapshotReadFailure) -> SnapshotContents {
        let bounds = partBounds(size: size, from: partsFrom, read: read)
        @Sendable func readPart(_ index: Int) -> Result<(part: SnapshotParser.Part, end: Int), SnapshotReadFailure> {
            Result { () throws(SnapshotReadFailure) in
                var parser = SnapshotParser(readsHeader: index == 0, spill: spill.map(FieldsSpill.init))
                let end = try readPieces(into: &parser, from: bounds[index], to: bounds[index + 1], pieceSize: pieceSize, read: read)
                return (parser.finish(), end)
            }
        }
        let results = bounds.count > 2 ? BatchJSONCoding.concurrently(bounds.count - 1, readPart) : [readPart(0)]
        // A failure is the first in the file's order, as in a read in order; a file that ends
        // before its first byte (empty, or emptied once split) is an empty snapshot.
        var parts: [SnapshotParser.Part] = []
        for result in results {
            let (part, end) = try result.get()
            if parts.isEmpty, end == 0 { return SnapshotContents(header: (0, 0)) }
            parts.append(part)
        }
        return SnapshotParser.join(parts)
    }

    /// Where the parts of a snapshot of `size` bytes begin, and its size last: `[0, size]`
    /// (one part) below `from` bytes or on one core; else one part per core, each past the
    /// first starting after the first newline at or after its share's start (a part whose
    /// share holds no newline in its first piece joins the part before it). A read that fails
    /// there leaves the file in one part: read in order, it meets what a read in order meets
    /// first (an unknown format in the header, a failure earlier in the file).
    static func partBounds(
        size: Int, from: Int,
        read: (_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int) throws(FileSystem.Failure) -> Int
    ) -> [Int] {
        let cores = BatchJSONCoding.processorCount
        guard size >= from, size > 0, cores > 1 else { return [0, size] }
        let window = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)
        defer { window.deallocate() }
        var bounds = [0]
        for part in 1..<cores {
            let share = size / cores * part
            guard share > bounds.last! else { continue }
            guard let got = try? read(UnsafeMutableRawBufferPointer(rebasing: window[0..<min(window.count, size - share)]), share)
            else { return [0, size] }
            guard let newline = memchr(window.baseAddress!, 0x0A, got) else { continue }
            let start = share + (UnsafeRawPointer(newline) - UnsafeRawPointer(window.baseAddress!)) + 1
            if start < size { bounds.append(start) }
        }
        bounds.append(size)
        return bounds
    }

    /// Reads the lines of the file's bytes `start..<end` into `parser`, a piece at a time.
    ///
    /// - Returns: Where the bytes read ended: `end`, or sooner when the file ends first.
    private static func readPieces(
        into parser: inout SnapshotParser, from start: Int, to end: Int, pieceSize: Int,
        read: (_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int) throws(FileSystem.Failure) -> Int
    ) throws(SnapshotReadFailure) -> Int {
        var finished = false
        // A read that stops early lets go of the fields copied so far.
        defer { if !finished { parser.discard() } }
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(pieceSize, 1), alignment: 1)
        defer { buffer.deallocate() }
        var offset = start  // the file offset of the buffer's first byte
        var filled = 0
        var end = end
        while true {
            let wanted = min(buffer.count - filled, end - offset - filled)
            if wanted > 0 {
                let got: Int
                do {
                    got = try read(UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<(filled + wanted)]), offset + filled)
                } catch {
                    throw .read(error)
                }
                filled += got
                if got < wanted { end = offset + filled }
            }
            let isEnd = offset + filled >= end
            let base = UnsafePointer(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
            let used: Int
            do throws(SnapshotProblem) {
                used = try parser.parse(base, count: filled, offset: offset, isEnd: isEnd)
            } catch {
                throw .problem(error)
            }
            if isEnd { break }
            if used == 0 {
                // One line fills the buffer: make room for more of it.
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
        finished = true
        return end
    }

    /// The generation of a zone whose snapshot is missing or has no readable header: the
    /// newest journal that holds something, else the oldest one present, else 0. (A
    /// compaction that stopped before its rename leaves an empty next-generation journal
    /// behind; one that finished removed the older journals.)
    ///
    /// - Parameter journalSizes: The generation and size of each journal file.
    static func inferredGeneration(journalSizes: [(generation: Int, size: Int)]) -> Int {
        journalSizes.filter { $0.size > 0 }.map(\.generation).max()
            ?? journalSizes.map(\.generation).min() ?? 0
    }

    /// Builds a snapshot's contents from its bytes, given a piece at a time.
    private struct SnapshotParser {
        /// What the bytes of a part of the file held.
        struct Part {
            var header: (generation: Int, sequence: Int)?
            var records: RecordChunks
            var bad: [(offset: Int, bytes: [UInt8])]
        }

        private var header: (generation: Int, sequence: Int)?
        private var records = RecordChunks()
        private var bad: [(offset: Int, bytes: [UInt8])] = []
        private var parser = LineParser()
        private var fields: FieldsPool
        private var lineNumber = 0

        /// - Parameters:
        ///   - readsHeader: Whether the bytes start at the file's start, with the header
        ///     line (else they start at a record line of a file read in parts).
        ///   - spill: Where the fields go once read, or `nil` to keep them in memory.
        init(readsHeader: Bool, spill: FieldsSpill? = nil) {
            lineNumber = readsHeader ? 0 : 1
            fields = FieldsPool(spill: spill)
        }

        /// Decodes the complete lines of `base[0..<count]`, which starts at byte `offset`
        /// of the file; with `isEnd`, a last line without a newline too.
        ///
        /// - Returns: How many bytes it decoded: those after them start the next piece.
        /// - Throws: ``SnapshotProblem/unsupportedFormat(_:)`` for an unknown version.
        mutating func parse(
            _ base: UnsafePointer<UInt8>, count: Int, offset: Int, isEnd: Bool
        ) throws(SnapshotProblem) -> Int {
            var start = 0
            while start < count {
                let newline: Int
                if let found = memchr(base + start, 0x0A, count - start) {
                    newline = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
                } else if isEnd {
                    newline = count
                } else {
                    return start
                }
                defer { start = newline + 1 }
                let length = min(newline + 1, count) - start
                let bad = { (offset + start, Array(UnsafeBufferPointer(start: base + start, count: length))) }
                lineNumber += 1
                if lineNumber == 1 {
                    switch parseSnapshotHeader(base, start: start, end: newline) {
                    case .header(let generation, let sequence, _):
                        // The header's count (which compaction writes) is not needed: the
                        // records array is made once all are read, with room for them alone.
                        header = (generation, sequence)
                    case .unsupported(let format): throw .unsupportedFormat(format)
                    case .invalid: self.bad.append(bad())
                    }
                    continue
                }
                if isBlank(base, start, newline) { continue }
                // Trim trailing white space and one separating comma.
                var last = newline
                while last > start, [0x20, 0x09, 0x0D].contains(base[last - 1]) { last -= 1 }
                if last - start == 2, base[start] == UInt8(ascii: "]"), base[start + 1] == UInt8(ascii: "}") {
                    continue
                }
                if last > start, base[last - 1] == UInt8(ascii: ",") { last -= 1 }
                if let (record, bytes) = parser.parseSnapshotRecord(base, start: start, end: last) {
                    records.append(record)
                    fields.add(bytes, from: base, for: records.count - 1) { records[$0].fields = $1 }
                } else {
                    self.bad.append(bad())
                }
            }
            return count
        }

        /// Frees the fields copied so far, when the read stops before ``finish(isEmpty:)``.
        mutating func discard() {
            fields.discard()
        }

        /// What the pieces held.
        mutating func finish() -> Part {
            fields.finish { records[$0].fields = $1 }
            fields.discard()
            defer { self = SnapshotParser(readsHeader: false) }
            return Part(header: header, records: records, bad: bad)
        }

        /// The contents of a file from its parts, in the file's order: the records in one
        /// array with room for them alone, filled a chunk at a time.
        static func join(_ parts: [Part]) -> SnapshotContents {
            var contents = SnapshotContents(header: parts.first?.header)
            contents.records.reserveCapacity(parts.reduce(0) { $0 + $1.records.count })
            for var part in parts {
                part.records.move(to: &contents.records)
                contents.bad.append(contentsOf: part.bad)
            }
            return contents
        }
    }

    /// Records as they are read, in arrays of at most ``chunkSize``: one array per part of a
    /// file read in parts would be copied into the whole file's array and freed, and freeing
    /// a block that large makes the C library keep smaller ones (under it) mapped once freed,
    /// which raised the peak memory of opening 100,000 records by 3 MiB. A chunk is smaller
    /// than the blocks the library maps on their own (128 KiB).
    private struct RecordChunks {
        static let chunkSize = 1_024
        private var chunks: [[StoredRecord]] = []
        private(set) var count = 0

        mutating func append(_ record: StoredRecord) {
            if chunks.last.map({ $0.count == Self.chunkSize }) ?? true {
                chunks.append([])
                chunks[chunks.count - 1].reserveCapacity(Self.chunkSize)
            }
            chunks[chunks.count - 1].append(record)
            count += 1
        }

        /// The `index`th record appended.
        subscript(index: Int) -> StoredRecord {
            get { chunks[index / Self.chunkSize][index % Self.chunkSize] }
            _modify { yield &chunks[index / Self.chunkSize][index % Self.chunkSize] }
        }

        /// Moves the records to the end of `records`, freeing each chunk once it is copied.
        mutating func move(to records: inout [StoredRecord]) {
            for index in chunks.indices {
                records.append(contentsOf: chunks[index])
                chunks[index] = []
            }
            chunks = []
            count = 0
        }
    }

    private enum HeaderResult {
        /// `count`: the number of records the header says the snapshot holds, if it says.
        case header(generation: Int, sequence: Int, count: Int?)
        case unsupported(Int)
        case invalid
    }

    private static func parseSnapshotHeader(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> HeaderResult {
        var scanner = JSONScanner(base: base, count: end, position: start)
        guard scanner.consume(UInt8(ascii: "{")) else { return .invalid }
        var format: Int?
        var generation: Int?
        var sequence: Int?
        var count: Int?
        while true {
            scanner.skipWhitespace()
            guard let (keyStart, keyEnd, _) = scanner.scanString(), scanner.consume(UInt8(ascii: ":")) else {
                return .invalid
            }
            if scanner.bytesEqual(keyStart, keyEnd, "records") {
                guard scanner.consume(UInt8(ascii: "[")) else { return .invalid }
                scanner.skipWhitespace()
                guard scanner.isAtEnd else { return .invalid }
                break
            } else if scanner.bytesEqual(keyStart, keyEnd, "format") {
                format = scanner.readInt()
                if format == nil { return .invalid }
            } else if scanner.bytesEqual(keyStart, keyEnd, "generation") {
                generation = scanner.readInt()
            } else if scanner.bytesEqual(keyStart, keyEnd, "sequence") {
                sequence = scanner.readInt()
            } else if scanner.bytesEqual(keyStart, keyEnd, "count"), case var probe = scanner, let value = probe.readInt() {
                // Only a hint: any other value is skipped, as every unknown key is.
                count = value
                scanner = probe
            } else {
                guard scanner.skipValue() else { return .invalid }
            }
            guard scanner.consume(UInt8(ascii: ",")) else { return .invalid }
        }
        guard let format else { return .invalid }
        guard format == version else { return .unsupported(format) }
        guard let generation, let sequence, generation >= 0, sequence >= 0 else { return .invalid }
        return .header(generation: generation, sequence: sequence, count: count.flatMap { $0 >= 0 ? $0 : nil })
    }
}
