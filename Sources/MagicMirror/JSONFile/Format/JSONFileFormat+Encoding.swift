import Foundation

/// Writing the format: journal lines and snapshots, straight into bytes.
extension JSONFileFormat {
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
}
