import Foundation

/// Version 1 of the JSON-file database's on-disk format: file names, and the encoders and
/// parsers of journal lines and snapshots. The spec is the `JSONFileFormat` DocC article.
///
/// A journal line is one changed record:
///
/// ```json
/// {"seq":7,"op":"save","id":"a1","version":2,"clock":"1763703120123-0","writer":"w-41-9f2c","end":true,"fields":{"title":"Milk"}}
/// ```
///
/// A snapshot is one JSON document written one record per line, so it can be read both as
/// JSON (`jq`) and line by line (recovery, speed).
enum JSONFileFormat {
    /// The format version this library reads and writes.
    static let version = 1

    static let databaseFile = "database.json"
    static let snapshotFile = "snapshot.json"
    static let snapshotTemporaryFile = "snapshot.json.tmp"
    static let lockFile = "lock"
    static let publicDirectory = "public"
    static let privateDirectory = "private"

    /// The journal of a generation: `journal-<generation>.ndjson`.
    static func journalFile(_ generation: Int) -> String { "journal-\(generation).ndjson" }

    /// The generation of a journal file name, or `nil` for another name.
    static func generation(ofJournal name: String) -> Int? {
        guard name.hasPrefix("journal-"), name.hasSuffix(".ndjson") else { return nil }
        return Int(name.dropFirst("journal-".count).dropLast(".ndjson".count))
    }

    // MARK: Encoding

    /// Appends the journal line of one changed record.
    ///
    /// - Parameters:
    ///   - sequence: The commit's sequence number (shared by every line of the commit).
    ///   - isLast: Whether this is the last line of its append (`"end":true`).
    static func appendJournalLine(
        to writer: inout JSONByteWriter, sequence: Int, record: StoredRecord, isLast: Bool
    ) {
        writer.append("{\"seq\":")
        writer.append(sequence)
        writer.append(record.isDeleted ? ",\"op\":\"delete\",\"id\":" : ",\"op\":\"save\",\"id\":")
        appendEnvelope(to: &writer, record: record)
        if isLast { writer.append(",\"end\":true") }
        appendFields(to: &writer, record: record)
        writer.append("}\n")
    }

    /// Appends a snapshot record object (without a separator or line feed).
    static func appendSnapshotRecord(to writer: inout JSONByteWriter, record: StoredRecord) {
        writer.append("{\"id\":")
        appendEnvelope(to: &writer, record: record)
        writer.append(",\"created\":")
        writer.append(record.created)
        appendFields(to: &writer, record: record)
        writer.append("}")
    }

    /// Appends the first line of a snapshot, which opens its `records` array.
    static func appendSnapshotHeader(
        to writer: inout JSONByteWriter, generation: Int, sequence: Int, count: Int
    ) {
        writer.append("{\"format\":")
        writer.append(version)
        writer.append(",\"generation\":")
        writer.append(generation)
        writer.append(",\"sequence\":")
        writer.append(sequence)
        writer.append(",\"count\":")
        writer.append(count)
        writer.append(",\"records\":[\n")
    }

    /// The last line of a snapshot.
    static let snapshotFooter: StaticString = "]}\n"

    private static func appendEnvelope(to writer: inout JSONByteWriter, record: StoredRecord) {
        writer.append(string: record.id)
        writer.append(",\"version\":")
        writer.append(record.version)
        writer.append(",\"clock\":")
        writer.append(record.modified)
        writer.append(",\"writer\":")
        writer.append(string: record.writer)
    }

    /// Fields go last, raw; fields that span lines (pretty-printed JSON) are kept exactly
    /// as a JSON string under `fieldsText`, so that every change stays on one line.
    private static func appendFields(to writer: inout JSONByteWriter, record: StoredRecord) {
        guard let fields = record.fields else { return }
        let multiline = fields.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return false }
            return memchr(base, 0x0A, raw.count) != nil || memchr(base, 0x0D, raw.count) != nil
        }
        if multiline {
            writer.append(",\"fieldsText\":")
            writer.append(string: String(decoding: fields, as: UTF8.self))
        } else {
            writer.append(",\"fields\":")
            writer.append(raw: fields)
        }
    }

    // MARK: Parsing

    /// One decoded journal line.
    struct JournalEntry {
        var sequence: Int
        var record: StoredRecord
        var isLast: Bool
    }

    /// The result of reading a stretch of journal.
    struct JournalScan {
        /// Complete commits, in order: sequence and changed records.
        var commits: [(sequence: Int, records: [StoredRecord])] = []
        /// Bytes from the start of the stretch to the end of the last complete append.
        var consumed = 0
        /// Lines within `consumed` that do not decode: offset and length (newline included),
        /// relative to the stretch.
        var bad: [(offset: Int, length: Int)] = []
        /// Complete commits whose sequence number is not above every one before them (the
        /// reader's and the stretch's): the offset and length of their lines, and the number.
        /// They are not in `commits`.
        var repeated: [(offset: Int, length: Int, sequence: Int)] = []
    }

    /// Reads journal lines from `count` bytes at `base`.
    ///
    /// Lines are applied an append at a time: the last line of every append carries
    /// `"end":true`, and only lines followed by such a line are complete. An append holds
    /// one or more whole commits (consecutive lines with the same `seq`); a failed or
    /// interrupted append has no `end` at its end, so none of it is ever applied. Anything
    /// after the last `end` line is left unconsumed.
    ///
    /// Sequence numbers only grow: a commit whose number is not above `sequence` (what the
    /// reader has applied already) and every earlier commit of the stretch is listed in
    /// ``JournalScan/repeated`` instead of ``JournalScan/commits``.
    static func scanJournal(
        _ base: UnsafePointer<UInt8>, count: Int, after sequence: Int, parser: inout LineParser
    ) -> JournalScan {
        var scan = JournalScan()
        var pending: [(sequence: Int, records: [StoredRecord], start: Int, end: Int)] = []
        var pendingBad: [(offset: Int, length: Int)] = []
        var highest = sequence
        var start = 0
        while start < count {
            guard let found = memchr(base + start, 0x0A, count - start) else { break }
            let newline = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
            defer { start = newline + 1 }
            if isBlank(base, start, newline) { continue }
            guard let entry = parser.parseJournalLine(base, start: start, end: newline) else {
                pendingBad.append((start, newline + 1 - start))
                continue
            }
            // Only the sequence number is read from the last pending commit: a copy of the
            // element would share its records' storage, and each append would then copy them
            // all (quadratic in the size of a commit).
            if !pending.isEmpty, pending[pending.count - 1].sequence == entry.sequence {
                pending[pending.count - 1].records.append(entry.record)
                pending[pending.count - 1].end = newline + 1
            } else {
                pending.append((entry.sequence, [entry.record], start, newline + 1))
            }
            if entry.isLast {
                for commit in pending {
                    if commit.sequence > highest {
                        highest = commit.sequence
                        scan.commits.append((commit.sequence, commit.records))
                    } else {
                        scan.repeated.append((commit.start, commit.end - commit.start, commit.sequence))
                    }
                }
                pending.removeAll()
                scan.consumed = newline + 1
                scan.bad.append(contentsOf: pendingBad)
                pendingBad.removeAll()
            }
        }
        return scan
    }

    private static func isBlank(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        var index = start
        while index < end {
            switch base[index] {
            case 0x20, 0x09, 0x0D: index += 1
            default: return false
            }
        }
        return true
    }

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
            if let record = parser.parseSnapshotRecord(base, start: start, end: last) {
                contents.records.append(record)
            } else {
                contents.bad.append((start, length))
            }
        }
        return contents
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

    /// Decodes journal lines and snapshot records, remembering the last writer id so that
    /// the many lines of one writer share one string.
    struct LineParser {
        private var lastWriterBytes: [UInt8] = []
        private var lastWriter = ""

        /// Decodes one journal line (without its newline), or returns `nil`.
        mutating func parseJournalLine(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> JournalEntry? {
            guard let parsed = parse(base, start: start, end: end), let sequence = parsed.sequence,
                  sequence > 0, let operation = parsed.operation
            else { return nil }
            switch operation {
            case .save: guard parsed.record.fields != nil else { return nil }
            case .delete: guard parsed.record.fields == nil else { return nil }
            }
            return JournalEntry(sequence: sequence, record: parsed.record, isLast: parsed.isLast)
        }

        /// Decodes one snapshot record object, or returns `nil`.
        mutating func parseSnapshotRecord(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> StoredRecord? {
            guard let parsed = parse(base, start: start, end: end), parsed.sequence == nil,
                  parsed.operation == nil, parsed.record.fields != nil
            else { return nil }
            return parsed.record
        }

        private enum Operation { case save, delete }

        private struct Parsed {
            var sequence: Int?
            var operation: Operation?
            var record: StoredRecord
            var isLast: Bool
        }

        private mutating func parse(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> Parsed? {
            var scanner = JSONScanner(base: base, count: end, position: start)
            guard scanner.consume(UInt8(ascii: "{")) else { return nil }
            var sequence: Int?
            var operation: Operation?
            var id: String?
            var version: Int?
            var clock: HLCTimestamp?
            var created: HLCTimestamp?
            var writer: String?
            var isLast = false
            var fields: Data?
            scanner.skipWhitespace()
            if scanner.peek == UInt8(ascii: "}") { return nil }
            while true {
                scanner.skipWhitespace()
                guard let (keyStart, keyEnd, _) = scanner.scanString(), scanner.consume(UInt8(ascii: ":")) else {
                    return nil
                }
                scanner.skipWhitespace()
                let keyLength = keyEnd - keyStart
                switch (keyLength, scanner[keyStart]) {
                case (3, UInt8(ascii: "s")) where scanner.bytesEqual(keyStart, keyEnd, "seq"):
                    guard sequence == nil, let value = scanner.readInt() else { return nil }
                    sequence = value
                case (2, UInt8(ascii: "o")) where scanner.bytesEqual(keyStart, keyEnd, "op"):
                    guard operation == nil, let (valueStart, valueEnd, _) = scanner.scanString() else { return nil }
                    if scanner.bytesEqual(valueStart, valueEnd, "save") {
                        operation = .save
                    } else if scanner.bytesEqual(valueStart, valueEnd, "delete") {
                        operation = .delete
                    } else {
                        return nil
                    }
                case (2, UInt8(ascii: "i")) where scanner.bytesEqual(keyStart, keyEnd, "id"):
                    guard id == nil, let value = scanner.readString(), NameRules.problem(with: value) == nil else {
                        return nil
                    }
                    id = value
                case (7, UInt8(ascii: "v")) where scanner.bytesEqual(keyStart, keyEnd, "version"):
                    guard version == nil, let value = scanner.readInt(), value >= 1 else { return nil }
                    version = value
                case (5, UInt8(ascii: "c")) where scanner.bytesEqual(keyStart, keyEnd, "clock"):
                    guard clock == nil, let (valueStart, valueEnd, escaped) = scanner.scanString(), !escaped,
                          let value = Self.clock(scanner, valueStart, valueEnd)
                    else { return nil }
                    clock = value
                case (7, UInt8(ascii: "c")) where scanner.bytesEqual(keyStart, keyEnd, "created"):
                    guard created == nil, let (valueStart, valueEnd, escaped) = scanner.scanString(), !escaped,
                          let value = Self.clock(scanner, valueStart, valueEnd)
                    else { return nil }
                    created = value
                case (6, UInt8(ascii: "w")) where scanner.bytesEqual(keyStart, keyEnd, "writer"):
                    guard writer == nil, let (valueStart, valueEnd, escaped) = scanner.scanString() else { return nil }
                    if escaped {
                        var copy = scanner
                        copy.position = valueStart - 1
                        writer = copy.readString()
                    } else {
                        writer = internedWriter(scanner.pointer(at: valueStart), count: valueEnd - valueStart)
                    }
                case (3, UInt8(ascii: "e")) where scanner.bytesEqual(keyStart, keyEnd, "end"):
                    guard let value = scanner.readBool() else { return nil }
                    isLast = value
                case (6, UInt8(ascii: "f")) where scanner.bytesEqual(keyStart, keyEnd, "fields"):
                    guard fields == nil, scanner.peek == UInt8(ascii: "{") else { return nil }
                    let valueStart = scanner.position
                    guard scanner.skipValue() else { return nil }
                    fields = Data(bytes: scanner.pointer(at: valueStart), count: scanner.position - valueStart)
                case (10, UInt8(ascii: "f")) where scanner.bytesEqual(keyStart, keyEnd, "fieldsText"):
                    guard fields == nil, let text = scanner.readString() else { return nil }
                    let data = Data(text.utf8)
                    guard JSONScanner.isSingleObject(data) else { return nil }
                    fields = data
                default:
                    guard scanner.skipValue() else { return nil }
                }
                if scanner.consume(UInt8(ascii: ",")) { continue }
                guard scanner.consume(UInt8(ascii: "}")) else { return nil }
                break
            }
            scanner.skipWhitespace()
            guard scanner.isAtEnd, let id, let version, let clock, let writer else { return nil }
            return Parsed(
                sequence: sequence, operation: operation,
                record: StoredRecord(
                    id: id, version: version, fields: fields, modified: clock, writer: writer, created: created),
                isLast: isLast)
        }

        private mutating func internedWriter(_ pointer: UnsafePointer<UInt8>, count: Int) -> String {
            if count == lastWriterBytes.count,
               lastWriterBytes.withUnsafeBufferPointer({ memcmp($0.baseAddress!, pointer, count) == 0 }) {
                return lastWriter
            }
            lastWriterBytes = Array(UnsafeBufferPointer(start: pointer, count: count))
            lastWriter = String(decoding: lastWriterBytes, as: UTF8.self)
            return lastWriter
        }

        /// Parses `<millis>-<counter>` from the bytes of a string.
        private static func clock(_ scanner: JSONScanner, _ start: Int, _ end: Int) -> HLCTimestamp? {
            var millis: Int64 = 0
            var counter: UInt64 = 0
            var index = start
            var digits = 0
            while index < end, scanner[index] &- UInt8(ascii: "0") < 10 {
                guard digits < 18 else { return nil }
                millis = millis * 10 + Int64(scanner[index] - UInt8(ascii: "0"))
                index += 1
                digits += 1
            }
            guard digits > 0, index < end, scanner[index] == UInt8(ascii: "-") else { return nil }
            index += 1
            digits = 0
            while index < end, scanner[index] &- UInt8(ascii: "0") < 10 {
                guard digits < 10 else { return nil }
                counter = counter * 10 + UInt64(scanner[index] - UInt8(ascii: "0"))
                index += 1
                digits += 1
            }
            guard digits > 0, index == end, counter <= UInt64(UInt32.max) else { return nil }
            return HLCTimestamp(millis: millis, counter: UInt32(counter))
        }
    }
}
