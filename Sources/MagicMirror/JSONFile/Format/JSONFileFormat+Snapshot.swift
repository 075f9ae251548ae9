import Foundation

/// Reading snapshots, line by line, with the bad lines set apart.
extension JSONFileFormat {
    /// What a snapshot holds.
    struct SnapshotContents {
        /// `nil` when the header line could not be read.
        var header: (generation: Int, sequence: Int)?
        var records: [StoredRecord] = []
        /// Lines that do not decode: offset and length (newline included).
        var bad: [(offset: Int, length: Int)] = []
    }

    /// Why a snapshot cannot be used at all.
    enum SnapshotProblem: Error {
        /// The snapshot says it is in a format version this library does not know.
        case unsupportedFormat(Int)
    }

    /// Reads the bytes of a whole snapshot file; an empty file is an empty snapshot of
    /// generation 0.
    static func parseSnapshot(_ bytes: [UInt8]) -> Result<SnapshotContents, SnapshotProblem> {
        guard !bytes.isEmpty else { return .success(SnapshotContents(header: (0, 0))) }
        var parser = LineParser()
        return bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(SnapshotProblem) in
                try parseSnapshot(buffer.baseAddress!, count: buffer.count, parser: &parser)
            }
        }
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

    /// Reads a snapshot, line by line.
    ///
    /// - Throws: ``SnapshotProblem/unsupportedFormat(_:)`` for an unknown version.
    static func parseSnapshot(
        _ base: UnsafePointer<UInt8>, count: Int, parser: inout LineParser
    ) throws(SnapshotProblem) -> SnapshotContents {
        var contents = SnapshotContents()
        // The fields of every record, gathered into one buffer at the end.
        var fields: [LineParser.FieldsBytes] = []
        var start = 0
        var lineNumber = 0
        while start < count {
            let newline: Int
            if let found = memchr(base + start, 0x0A, count - start) {
                newline = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
            } else {
                newline = count
            }
            defer { start = newline + 1 }
            let length = min(newline + 1, count) - start
            lineNumber += 1
            if lineNumber == 1 {
                switch parseSnapshotHeader(base, start: start, end: newline) {
                case .header(let generation, let sequence): contents.header = (generation, sequence)
                case .unsupported(let format): throw .unsupportedFormat(format)
                case .invalid: contents.bad.append((start, length))
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
                contents.records.append(record)
                fields.append(bytes)
            } else {
                contents.bad.append((start, length))
            }
        }
        share(fields, from: base, into: &contents.records)
        return contents
    }

    /// Copies the fields of every record into one buffer and gives each record its part (a
    /// `Data` slice of the buffer, which costs no allocation of its own). A separate `Data`
    /// per record costs about 120 bytes more each (the storage object and the allocation's
    /// rounding), and one allocation and release each.
    private static func share(
        _ fields: [LineParser.FieldsBytes], from base: UnsafePointer<UInt8>, into records: inout [StoredRecord]
    ) {
        for (index, slice) in sharedFields(fields, from: base).enumerated() { records[index].fields = slice }
    }

    /// The bytes of `fields` copied into one buffer, as a `Data` slice of it each, in order
    /// (`nil` for `nil`).
    static func sharedFields(
        _ fields: [LineParser.FieldsBytes?], from base: UnsafePointer<UInt8>
    ) -> [Data?] {
        var buffer = Data(count: fields.reduce(0) { $0 + ($1?.count ?? 0) })
        buffer.withUnsafeMutableBytes { raw in
            guard let target = raw.baseAddress else { return }
            var offset = 0
            for bytes in fields {
                switch bytes {
                case .range(let range)?:
                    (target + offset).copyMemory(from: base + range.lowerBound, byteCount: range.count)
                case .data(let data)?:
                    data.withUnsafeBytes { (target + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                case nil:
                    break
                }
                offset += bytes?.count ?? 0
            }
        }
        var offset = buffer.startIndex
        return fields.map { bytes in
            guard let count = bytes?.count else { return nil }
            defer { offset += count }
            return buffer[offset..<(offset + count)]
        }
    }

    private enum HeaderResult {
        case header(generation: Int, sequence: Int)
        case unsupported(Int)
        case invalid
    }

    private static func parseSnapshotHeader(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> HeaderResult {
        var scanner = JSONScanner(base: base, count: end, position: start)
        guard scanner.consume(UInt8(ascii: "{")) else { return .invalid }
        var format: Int?
        var generation: Int?
        var sequence: Int?
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
            } else {
                guard scanner.skipValue() else { return .invalid }
            }
            guard scanner.consume(UInt8(ascii: ",")) else { return .invalid }
        }
        guard let format else { return .invalid }
        guard format == version else { return .unsupported(format) }
        guard let generation, let sequence, generation >= 0, sequence >= 0 else { return .invalid }
        return .header(generation: generation, sequence: sequence)
    }
}
