import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// Reading a zone's changes (or every live record) in pages, so that a zone of any size
/// opens: each page is one statement with a deadline of its own, decoded as it arrives.
///
/// Pages follow the order of the records' last change, `(seq, id)`, from where the last page
/// ended (the index `records_by_seq_id` of schema version 7 serves each page without
/// sorting). The first page is read alone, in one statement with the zone's row: a zone that
/// fits in it (nearly every pull) costs one round trip. When it does not fit, the read
/// starts again in a `REPEATABLE READ` transaction (``ServerLink/withSnapshot(logger:_:)``,
/// as the relay's user for a relay's request), so that every page is of one snapshot and the
/// records agree with the token, as the single statement did.
///
/// The fields of a page's records are one buffer, each record's a slice of it (as the
/// JSON-file database's are), and the records' writers are shared strings: a million small
/// records take little more memory than their bytes.
enum ZonePages {
    /// How a zone is read: the size of a page and how long one may take.
    struct Paging: Sendable {
        /// Records in a page at most.
        var rows = 10_000
        /// Bytes of fields in a page at most (a page holds at least one record, whatever its
        /// size).
        var bytes = 16 << 20
        /// How long one page may take (not the whole zone).
        var deadline = serverDeadline
        /// Called after each page with its number (from 0), for tests.
        var afterPage: (@Sendable (Int) async throws -> Void)?

        static let standard = Paging()
    }

    /// A page: the zone's row, whether the read is the complete zone, and its records.
    struct Page {
        var row: ZoneRow
        var isComplete: Bool
        var records: [StoredRecord] = []
        /// Where the next page starts, if there may be one.
        var next: (seq: Int, id: String)?
    }

    /// The changes of the zone `key` names since `token` (every live record when `token` is
    /// `nil`, of another generation, or from the future); `nil` when the zone does not exist
    /// or the role cannot see it.
    static func changes(
        _ key: ZoneKey, since token: ChangeToken?, link: ServerLink, paging: Paging, doing: String, logger: Logger
    ) async throws -> (row: ZoneRow, records: [StoredRecord], isComplete: Bool)? {
        try await withProgressDeadline(paging.deadline, doing) { progress in
            let first = try await link.withConnection { connection in
                guard let first = try await page(key, since: token, after: nil, paging: paging, on: connection, logger: logger)
                else { return nil as (row: ZoneRow, records: [StoredRecord], isComplete: Bool, more: Bool)? }
                progress.advance()
                try await paging.afterPage?(0)
                return (first.row, first.records, first.isComplete, first.next != nil)
            }
            guard let first, first.more else { return first.map { ($0.row, $0.records, $0.isComplete) } }
            // More than a page: read again from the start, every page in one snapshot.
            return try await link.withSnapshot(logger: logger) { connection in
                var records: [StoredRecord] = []
                var after: (seq: Int, id: String)?
                var number = 1
                while true {
                    guard let page = try await page(key, since: token, after: after, paging: paging, on: connection, logger: logger)
                    else { return nil }
                    progress.advance()
                    try await paging.afterPage?(number)
                    number += 1
                    records.append(contentsOf: page.records)
                    guard let next = page.next else { return (page.row, records, page.isComplete) }
                    after = next
                }
            }
        }
    }

    /// One page: the zone's row and up to `paging.rows` records (and about `paging.bytes` of
    /// fields) after `after`, in one statement.
    static func page(
        _ key: ZoneKey, since token: ChangeToken?, after: (seq: Int, id: String)?, paging: Paging,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> Page? {
        // The server applies canContinue(from:) to the zone's row as it reads it (a zone
        // without a commit yet has no record either way).
        let generation = token?.generation ?? -1
        let sequence = token?.sequence ?? -1
        let afterSeq = after?.seq ?? -1
        let afterID = after?.id ?? ""
        // The zone's row, then the records, in four columns: an id (`NULL` for the zone's
        // row), the fixed-width numbers packed as big-endian 8-byte integers (the record's
        // version, clock, creation clock and sequence; the zone's number, generation,
        // sequences, assets epoch and whether the read is complete), the fields, and the
        // writer (the zone's notification key). Few columns decode fast: a page of small
        // records is mostly the work of its cells. The rows come in the order of the index,
        // as the records' subquery orders them; the decoder checks it.
        let rows = try await connection.query(
            """
            WITH z AS MATERIALIZED (
                SELECT zn.zone_id, zn.generation, zn.base_seq, zn.last_seq, zn.assets_epoch, zn.notify_key,
                       NOT (\(generation)::int8 = zn.generation AND \(sequence)::int8 >= zn.base_seq
                            AND \(sequence)::int8 <= zn.last_seq) AS complete
                FROM magicmirror.zones zn
                WHERE zn.scope = \(key.scope) AND zn.owner = \(key.owner) AND zn.record_type = \(key.recordType))
            SELECT NULL::text, int8send(z.zone_id) || int8send(z.generation) || int8send(z.base_seq)
                               || int8send(z.last_seq) || int8send(z.assets_epoch) || int8send(CASE WHEN z.complete THEN 1 ELSE 0 END::int8),
                   NULL::bytea, z.notify_key
            FROM z
            UNION ALL
            SELECT w.id, int8send(w.version) || int8send(w.modified_millis) || int8send(w.modified_counter)
                         || int8send(w.created_millis) || int8send(w.created_counter) || int8send(w.seq),
                   w.fields, w.writer
            FROM z CROSS JOIN LATERAL (
                SELECT r.*, sum(coalesce(octet_length(r.fields), 0)) OVER (ORDER BY r.seq, r.id ROWS UNBOUNDED PRECEDING)
                            - coalesce(octet_length(r.fields), 0) AS before
                FROM (
                    SELECT r.id, r.version, r.fields, r.modified_millis, r.modified_counter, r.writer,
                           r.created_millis, r.created_counter, r.seq
                    FROM magicmirror.records r
                    WHERE r.zone_id = z.zone_id
                      AND r.seq > CASE WHEN z.complete THEN -1 ELSE \(sequence)::int8 END
                      AND (r.fields IS NOT NULL OR NOT z.complete)
                      AND (r.seq, r.id) > (\(afterSeq)::int8, \(afterID)::text)
                    ORDER BY r.seq, r.id
                    LIMIT \(paging.rows)) r) w
            WHERE w.before < \(paging.bytes)::int8
            """, logger: logger)
        var decoder = PageDecoder()
        var page: Page?
        for try await row in rows {
            var cells = row.makeIterator()
            guard let idCell = cells.next(), var numbers = cells.next()?.bytes, let fieldsCell = cells.next(),
                  let text = cells.next()?.bytes
            else { continue }
            if let idBytes = idCell.bytes {
                try decoder.add(id: String(buffer: idBytes), numbers: &numbers, fields: fieldsCell.bytes, writer: text)
            } else {
                guard let zoneID = numbers.readInteger(as: Int64.self), let generation = numbers.readInteger(as: Int64.self),
                      let base = numbers.readInteger(as: Int64.self), let last = numbers.readInteger(as: Int64.self),
                      let epoch = numbers.readInteger(as: Int64.self), let complete = numbers.readInteger(as: Int64.self)
                else { throw MirrorError(.corruptEntry, "a page of the zone's records has no zone row") }
                page = Page(
                    row: ZoneRow(
                        zoneID: Int(zoneID), generation: Int(generation), baseSequence: Int(base),
                        lastSequence: Int(last), assetsEpoch: Int(epoch), notifyKey: String(buffer: text)),
                    isComplete: complete != 0)
            }
        }
        guard var page else { return nil }
        // Cut by its limit of records or of bytes: more may follow (at worst, an empty page).
        if decoder.count >= paging.rows || decoder.bytes >= paging.bytes, let last = decoder.last {
            page.next = last
        }
        page.records = decoder.finish()
        return page
    }
}

/// Decodes the records of a page's rows: the fields into one buffer, the writers into shared
/// strings.
private struct PageDecoder {
    private struct Pending {
        let id: String
        let version: Int
        let fields: ByteBuffer?
        let millis: Int
        let counter: Int
        let writer: String
        let createdMillis: Int
        let createdCounter: Int
        let seq: Int
    }
    private var pending: [Pending] = []
    private var writers: [ByteBuffer: String] = [:]
    private(set) var bytes = 0
    private(set) var last: (seq: Int, id: String)?
    var count: Int { pending.count }

    private var lastWriter: (bytes: ByteBuffer, writer: String)?
    /// Whether the rows came in order: they do, by the plan; sorted here otherwise.
    private var inOrder = true

    /// Adds the record of a row: its id, its numbers (version, clock, creation clock,
    /// sequence), its fields and its writer.
    mutating func add(id: String, numbers: inout ByteBuffer, fields: ByteBuffer?, writer raw: ByteBuffer) throws {
        guard let version = numbers.readInteger(as: Int64.self), let millis = numbers.readInteger(as: Int64.self),
              let counter = numbers.readInteger(as: Int64.self), let createdMillis = numbers.readInteger(as: Int64.self),
              let createdCounter = numbers.readInteger(as: Int64.self), let seq = numbers.readInteger(as: Int64.self)
        else { throw MirrorError(.corruptEntry, "a record of the zone came without its numbers") }
        bytes += fields?.readableBytes ?? 0
        let writer: String
        if let last = lastWriter, last.bytes == raw {
            writer = last.writer
        } else if let known = writers[raw] {
            writer = known
            lastWriter = (raw, known)
        } else {
            writer = String(buffer: raw)
            if writers.count < 256 { writers[raw] = writer }
            lastWriter = (raw, writer)
        }
        pending.append(Pending(
            id: id, version: Int(version), fields: fields, millis: Int(millis), counter: Int(counter), writer: writer,
            createdMillis: Int(createdMillis), createdCounter: Int(createdCounter), seq: Int(seq)))
        // `last` is the greatest key: where the next page starts.
        if let last, !Self.precedes(last, (Int(seq), id)) {
            inOrder = false
        } else {
            last = (Int(seq), id)
        }
    }

    /// Whether key `a` comes before key `b`: by sequence, then by the id's UTF-8 bytes (the
    /// server's `"C"` collation).
    static func precedes(_ a: (seq: Int, id: String), _ b: (seq: Int, id: String)) -> Bool {
        a.seq != b.seq ? a.seq < b.seq : a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
    }

    /// The page's records, in order, their fields slices of one buffer.
    mutating func finish() -> [StoredRecord] {
        if !inOrder { pending.sort { Self.precedes(($0.seq, $0.id), ($1.seq, $1.id)) } }
        var buffer = Data(count: bytes)
        var offsets: [Int] = []
        offsets.reserveCapacity(pending.count)
        buffer.withUnsafeMutableBytes { target in
            var offset = 0
            for entry in pending {
                offsets.append(offset)
                guard let fields = entry.fields else { continue }
                fields.withUnsafeReadableBytes { source in
                    if source.count > 0 {
                        target.baseAddress!.advanced(by: offset).copyMemory(from: source.baseAddress!, byteCount: source.count)
                    }
                }
                offset += fields.readableBytes
            }
        }
        var records: [StoredRecord] = []
        records.reserveCapacity(pending.count)
        for (index, entry) in pending.enumerated() {
            let fields = entry.fields.map { buffer[offsets[index]..<(offsets[index] + $0.readableBytes)] }
            records.append(StoredRecord(
                id: entry.id, version: entry.version, fields: fields,
                modified: HLCTimestamp(millis: Int64(entry.millis), counter: UInt32(clamping: entry.counter)),
                writer: entry.writer,
                created: HLCTimestamp(millis: Int64(entry.createdMillis), counter: UInt32(clamping: entry.createdCounter))))
        }
        pending = []
        return records
    }
}
