import Foundation

/// Writing the format: journal lines and snapshots, straight into bytes.
extension JSONFileFormat {
    /// Appends the journal line of one changed record that does not end an append (an
    /// append's last line is added by ``JournalAppend``, which seals it).
    ///
    /// - Parameter sequence: The commit's sequence number (shared by every line of the commit).
    static func appendJournalLine(to writer: inout JSONByteWriter, sequence: Int, record: StoredRecord) {
        appendJournalLine(to: &writer, sequence: sequence, record: record, endsAppendAfter: nil)
    }

    /// Appends a journal line; with `endsAppendAfter` (the number of the append's bytes
    /// before `writer`'s first byte), the line ends the append: it carries `"end":true`, the
    /// number of the append's bytes before it (`prior`) and a checksum of zeros that
    /// ``JournalAppend/sealed()`` fills in.
    ///
    /// - Returns: Where the checksum's digits are in `writer`, for an append's last line.
    @discardableResult
    private static func appendJournalLine(
        to writer: inout JSONByteWriter, sequence: Int, record: StoredRecord, endsAppendAfter before: Int?
    ) -> Int? {
        let lineStart = writer.count
        writer.append("{\"seq\":")
        writer.append(sequence)
        writer.append(record.isDeleted ? ",\"op\":\"delete\",\"id\":" : ",\"op\":\"save\",\"id\":")
        appendEnvelope(to: &writer, record: record)
        var sumOffset: Int?
        if let before {
            writer.append(",\"end\":true,\"prior\":")
            writer.append(before + lineStart)
            writer.append(",\"sum\":\"")
            sumOffset = writer.count
            writer.append("0000000000000000\"")
        }
        appendFields(to: &writer, record: record)
        writer.append("}\n")
        return sumOffset
    }

    /// The lines of one journal append, added in order; the last one ends the append and
    /// carries its checksum (see the format article, "Checksums").
    ///
    /// The bytes are kept in the parts they were built in: a long run of lines built in
    /// parallel parts is not copied into one buffer (for 100,000 lines, copying 31 MB into a
    /// new buffer, faulting its pages in and unmapping it again was a seventh of the commit),
    /// and the parts are written one after the other.
    struct JournalAppend {
        /// The finished parts, in order, before `writer`'s.
        private var parts: [[UInt8]] = []
        /// The number of bytes in `parts`.
        private var partsCount = 0
        /// The part lines are added to one by one.
        private var writer = JSONByteWriter()
        /// The bytes the caller expects the whole append to take, reserved when `writer`
        /// first takes a line (less what is already in `parts`).
        private let capacity: Int
        /// Where the checksum's digits are in `writer`, once the last line is added.
        private var sumOffset: Int?

        /// - Parameter capacity: The bytes to reserve (see ``journalLineCapacity(for:)``).
        init(capacity: Int) {
            self.capacity = capacity
        }

        /// The number of bytes so far.
        var count: Int { partsCount + writer.count }

        /// Adds the line of one changed record.
        ///
        /// - Parameters:
        ///   - sequence: The commit's sequence number (shared by every line of the commit).
        ///   - isLast: Whether this is the append's last line; nothing may be added after it.
        mutating func add(sequence: Int, record: StoredRecord, isLast: Bool) {
            precondition(sumOffset == nil, "a line added after the end of a journal append")
            reserveIfNew()
            sumOffset = appendJournalLine(
                to: &writer, sequence: sequence, record: record, endsAppendAfter: isLast ? partsCount : nil)
        }

        /// Adds the lines of `records`, all of commit `sequence` and none the append's last.
        ///
        /// A long run (``JSONFileFormat/linesBuiltInParallel`` lines or more) is built in
        /// parallel parts, one per core, each in a buffer of its own, kept as parts of the
        /// append: the same bytes as the lines added one by one, in about half the time on
        /// two cores (building lines was a sixth of a 100,000-record commit).
        mutating func add(sequence: Int, records: ArraySlice<StoredRecord>) {
            precondition(sumOffset == nil, "a line added after the end of a journal append")
            guard records.count >= linesBuiltInParallel else {
                reserveIfNew()
                for record in records { appendJournalLine(to: &writer, sequence: sequence, record: record) }
                return
            }
            let built = BatchJSONCoding.inParallelRanges(records.count) { range -> [UInt8] in
                let lines = records[(records.startIndex + range.lowerBound)..<(records.startIndex + range.upperBound)]
                var part = JSONByteWriter(capacity: lines.reduce(0) { $0 + journalLineCapacity(for: $1) })
                for record in lines { appendJournalLine(to: &part, sequence: sequence, record: record) }
                return part.bytes
            }
            if writer.count > 0 {
                partsCount += writer.count
                parts.append(writer.bytes)
                writer = JSONByteWriter()
            }
            for part in built {
                partsCount += part.count
                parts.append(part)
            }
        }

        /// Reserves the rest of the expected size in a `writer` that has no room yet.
        private mutating func reserveIfNew() {
            if writer.bytes.capacity == 0 { writer.bytes.reserveCapacity(max(256, capacity - partsCount)) }
        }

        /// The append's bytes, in parts to write one after the other, with the checksum of
        /// all of them (its own 16 digits left out) written into the last line.
        consuming func sealed() -> [[UInt8]] {
            guard let sumOffset else {
                preconditionFailure("a journal append without its last line")
            }
            var hash = XXHash64()
            for part in parts {
                part.withUnsafeBytes { hash.update($0.baseAddress!, count: $0.count) }
            }
            // In place: `self` is owned here, so its buffer is not copied.
            writer.bytes.withUnsafeMutableBufferPointer { buffer in
                let base = UnsafeMutableRawPointer(buffer.baseAddress!)
                writeHex(appendChecksum(base, count: buffer.count, sumAt: sumOffset, after: hash), to: base + sumOffset)
            }
            parts.append(writer.bytes)
            return parts
        }
    }

    /// From this many lines, a run of lines is built in parallel parts.
    static let linesBuiltInParallel = 2 * BatchJSONCoding.recordsPerParallelPart

    /// The checksum of an append of `count` bytes at `base` whose 16 checksum digits are at
    /// `sumAt`: XXH64 of the bytes before the digits followed by the bytes after them.
    ///
    /// - Parameter hash: The hash of the append's bytes before `base`, when it was written
    ///   in parts (``JournalAppend``).
    static func appendChecksum(
        _ base: UnsafeRawPointer, count: Int, sumAt sumOffset: Int, after hash: XXHash64 = XXHash64()
    ) -> UInt64 {
        var hash = hash
        hash.update(base, count: sumOffset)
        hash.update(base + sumOffset + 16, count: count - sumOffset - 16)
        return hash.finalize()
    }

    /// Writes `value` as 16 lowercase hexadecimal digits.
    private static func writeHex(_ value: UInt64, to destination: UnsafeMutableRawPointer) {
        let digits = Array("0123456789abcdef".utf8)
        for index in 0..<16 {
            let nibble = Int((value >> UInt64(60 - 4 * index)) & 0xF)
            destination.storeBytes(of: digits[nibble], toByteOffset: index, as: UInt8.self)
        }
    }

    /// Room for the journal line of `record`: its fields, id and writer, and the envelope
    /// around them: close to the line's size (the buffer grows past it when escapes or
    /// long numbers need more).
    static func journalLineCapacity(for record: StoredRecord) -> Int {
        (record.fields?.count ?? 0) + record.id.utf8.count + record.writer.utf8.count + 128
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
        writer.append(repeatedString: record.writer)
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
}
