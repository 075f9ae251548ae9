import Foundation

extension JSONFileFormat {
    /// Decodes journal lines and snapshot records, remembering the last writer id so that
    /// the many lines of one writer share one string.
    struct LineParser {
        private var lastWriterBytes: [UInt8] = []
        private var lastWriter = ""

        /// Decodes one journal line (without its newline), or returns `nil`.
        mutating func parseJournalLine(_ base: UnsafePointer<UInt8>, start: Int, end: Int) -> JournalEntry? {
            guard let (entry, fields) = parseJournalLine(base, start: start, end: end, deferringFields: false) else {
                return nil
            }
            var result = entry
            if case .data(let data)? = fields { result.record.fields = data }
            return result
        }

        /// Decodes one journal line (without its newline), or returns `nil`. With
        /// `deferringFields`, the record's fields are left `nil` and their bytes returned
        /// apart (see ``FieldsBytes``), as ``parseSnapshotRecord(_:start:end:)`` does; `nil`
        /// for a delete.
        mutating func parseJournalLine(
            _ base: UnsafePointer<UInt8>, start: Int, end: Int, deferringFields: Bool
        ) -> (entry: JournalEntry, fields: FieldsBytes?)? {
            guard let parsed = parse(base, start: start, end: end, deferringFields: deferringFields),
                  let sequence = parsed.sequence, sequence > 0, let operation = parsed.operation
            else { return nil }
            var record = parsed.record
            let fields: FieldsBytes?
            if let range = parsed.fieldsRange {
                fields = .range(range)
            } else {
                fields = record.fields.map { .data($0) }
            }
            record.fields = nil
            switch operation {
            case .save: guard fields != nil else { return nil }
            case .delete: guard fields == nil else { return nil }
            }
            guard parsed.isLast || parsed.seal == nil else { return nil }
            return (JournalEntry(sequence: sequence, record: record, isLast: parsed.isLast, seal: parsed.seal), fields)
        }

        /// Decodes one snapshot record object, or returns `nil`. The record's fields are left
        /// `nil`; their bytes are returned apart (see ``FieldsBytes``), so that the caller
        /// keeps the fields of all records in one buffer instead of one allocation each.
        mutating func parseSnapshotRecord(
            _ base: UnsafePointer<UInt8>, start: Int, end: Int
        ) -> (record: StoredRecord, fields: FieldsBytes)? {
            guard let parsed = parse(base, start: start, end: end, deferringFields: true),
                  parsed.sequence == nil, parsed.operation == nil
            else { return nil }
            if let range = parsed.fieldsRange { return (parsed.record, .range(range)) }
            guard let fields = parsed.record.fields else { return nil }
            var record = parsed.record
            record.fields = nil
            return (record, .data(fields))
        }

        /// Where a record's fields lie: bytes of the parsed buffer (as they were written), or
        /// a separate copy (fields written as escaped text).
        enum FieldsBytes {
            case range(Range<Int>)
            case data(Data)

            var count: Int {
                switch self {
                case .range(let range): range.count
                case .data(let data): data.count
                }
            }
        }

        private enum Operation { case save, delete }

        private struct Parsed {
            var sequence: Int?
            var operation: Operation?
            var record: StoredRecord
            var isLast: Bool
            var seal: JournalEntry.Seal?
            /// The range of the `fields` object in the buffer, when it was not copied.
            var fieldsRange: Range<Int>?
        }

        /// - Parameter deferringFields: Whether to return the range of a `fields` object
        ///   (``Parsed/fieldsRange``) instead of a copy of its bytes.
        private mutating func parse(
            _ base: UnsafePointer<UInt8>, start: Int, end: Int, deferringFields: Bool = false
        ) -> Parsed? {
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
            var prior: Int?
            var sum: (value: UInt64, offset: Int)?
            var fields: Data?
            var fieldsRange: Range<Int>?
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
                case (5, UInt8(ascii: "p")) where scanner.bytesEqual(keyStart, keyEnd, "prior"):
                    guard prior == nil, let value = scanner.readInt(), value >= 0 else { return nil }
                    prior = value
                case (3, UInt8(ascii: "s")) where scanner.bytesEqual(keyStart, keyEnd, "sum"):
                    guard sum == nil, let (valueStart, valueEnd, escaped) = scanner.scanString(), !escaped,
                          valueEnd - valueStart == 16, let value = Self.hex(scanner, valueStart)
                    else { return nil }
                    sum = (value, valueStart)
                case (3, UInt8(ascii: "e")) where scanner.bytesEqual(keyStart, keyEnd, "end"):
                    guard let value = scanner.readBool() else { return nil }
                    isLast = value
                case (6, UInt8(ascii: "f")) where scanner.bytesEqual(keyStart, keyEnd, "fields"):
                    guard fields == nil, fieldsRange == nil, scanner.peek == UInt8(ascii: "{") else { return nil }
                    let valueStart = scanner.position
                    guard scanner.skipValue() else { return nil }
                    if deferringFields {
                        fieldsRange = valueStart..<scanner.position
                    } else {
                        fields = Data(bytes: scanner.pointer(at: valueStart), count: scanner.position - valueStart)
                    }
                case (10, UInt8(ascii: "f")) where scanner.bytesEqual(keyStart, keyEnd, "fieldsText"):
                    guard fields == nil, fieldsRange == nil, let text = scanner.readString() else { return nil }
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
            // A checksum comes with the count of bytes before its line, or not at all.
            guard (prior == nil) == (sum == nil) else { return nil }
            return Parsed(
                sequence: sequence, operation: operation,
                record: StoredRecord(
                    id: id, version: version, fields: fields, modified: clock, writer: writer, created: created),
                isLast: isLast,
                seal: prior.map { JournalEntry.Seal(prior: $0, sum: sum!.value, sumOffset: sum!.offset) },
                fieldsRange: fieldsRange)
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

        /// Parses 16 lowercase hexadecimal digits at `start`.
        private static func hex(_ scanner: JSONScanner, _ start: Int) -> UInt64? {
            var value: UInt64 = 0
            for index in start..<(start + 16) {
                let byte = scanner[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                default: return nil
                }
                value = value << 4 | UInt64(digit)
            }
            return value
        }

        /// Parses `<millis>-<counter>` from the bytes of a string: every reading an
        /// ``HLCTimestamp`` holds, `Int64.min` and `Int64.max` (19 digits) included, as
        /// writers may commit any of them.
        private static func clock(_ scanner: JSONScanner, _ start: Int, _ end: Int) -> HLCTimestamp? {
            var millis: Int64 = 0
            var counter: UInt64 = 0
            var index = start
            let negative = index < end && scanner[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            var digits = 0
            while index < end, scanner[index] &- UInt8(ascii: "0") < 10 {
                // Built on the side of its sign, so that Int64.min is read too.
                let digit = Int64(scanner[index] - UInt8(ascii: "0"))
                let (times, overflowA) = millis.multipliedReportingOverflow(by: 10)
                let (sum, overflowB) = negative
                    ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
                guard !overflowA, !overflowB else { return nil }
                millis = sum
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
