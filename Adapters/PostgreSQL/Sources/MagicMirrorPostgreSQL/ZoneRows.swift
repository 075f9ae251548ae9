import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// A zone as the `magicmirror` tables name it: scope, owner (`''` for public zones) and
/// record type, each passed as a bound parameter.
struct ZoneKey: Sendable {
    let scope: String
    let owner: String
    let recordType: String

    init(_ zone: ZoneID) {
        scope = zone.scope.rawValue
        owner = zone.user ?? ""
        recordType = zone.recordType
    }
}

/// A record id as its UTF-8 bytes: the identity the server's `"C"` collation gives it.
struct RecordKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ id: String) { bytes = Array(id.utf8) }
}

/// A row of `magicmirror.zones`.
struct ZoneRow: Sendable {
    let zoneID: Int
    let generation: Int
    let baseSequence: Int
    let lastSequence: Int

    /// The zone's token: ``ChangeToken/initial`` until its first commit.
    var token: ChangeToken {
        lastSequence == 0 && baseSequence == 0 ? .initial : ChangeToken(generation: generation, sequence: lastSequence)
    }

    /// The zone's row, if it exists and the role can see it.
    static func read(_ key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> ZoneRow? {
        try await first(
            connection.query(
                """
                SELECT zone_id, generation, base_seq, last_seq FROM magicmirror.zones
                WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = \(key.recordType)
                """, logger: logger))
    }

    /// The zone's row, locked until the transaction ends: commits to one zone take turns,
    /// so sequence numbers become visible in the order they were drawn.
    static func lock(_ key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> ZoneRow? {
        try await first(
            connection.query(
                """
                SELECT zone_id, generation, base_seq, last_seq FROM magicmirror.zones
                WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = \(key.recordType)
                FOR UPDATE
                """, logger: logger))
    }

    private static func first(_ rows: PostgresRowSequence) async throws -> ZoneRow? {
        for try await (zoneID, generation, base, last) in rows.decode((Int, Int, Int, Int).self) {
            return ZoneRow(zoneID: zoneID, generation: generation, baseSequence: base, lastSequence: last)
        }
        return nil
    }
}

/// Reading and writing `magicmirror.records`.
enum RecordRows {
    /// The columns of a ``StoredRecord``, in the order ``decode(_:)`` reads them.
    private static let columns =
        "id, version, fields, modified_millis, modified_counter, writer, created_millis, created_counter"

    /// The stored records (tombstones included) among `ids`, by the UTF-8 bytes of their
    /// id: ids are compared byte for byte (`"e\u{301}"` and `"\u{e9}"` are two records),
    /// as the server's `"C"` collation does, not by Swift's canonical equivalence.
    static func select(
        zoneID: Int, ids: [String], on connection: PostgresConnection, logger: Logger
    ) async throws -> [RecordKey: StoredRecord] {
        let rows = try await connection.query(
            """
            SELECT \(unescaped: columns) FROM magicmirror.records
            WHERE zone_id = \(zoneID) AND id = ANY(\(ids)::text[])
            """, logger: logger)
        var found: [RecordKey: StoredRecord] = [:]
        for record in try await decode(rows) { found[RecordKey(record.id)] = record }
        return found
    }

    /// The records changed after `sequence`, tombstones included, in the order of their
    /// last change.
    static func changed(
        zoneID: Int, after sequence: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [StoredRecord] {
        try await decode(
            connection.query(
                """
                SELECT \(unescaped: columns) FROM magicmirror.records
                WHERE zone_id = \(zoneID) AND seq > \(sequence) ORDER BY seq, id
                """, logger: logger))
    }

    /// Every live record of the zone.
    static func live(zoneID: Int, on connection: PostgresConnection, logger: Logger) async throws -> [StoredRecord] {
        try await decode(
            connection.query(
                """
                SELECT \(unescaped: columns) FROM magicmirror.records
                WHERE zone_id = \(zoneID) AND fields IS NOT NULL ORDER BY seq, id
                """, logger: logger))
    }

    /// Stores `records` as one change: draws the next number of the server's sequence,
    /// upserts every record with it in one statement, and moves the zone's last sequence.
    ///
    /// - Returns: The sequence number of the change.
    static func write(
        _ records: [StoredRecord], zone zoneID: Int, key: ZoneKey,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> Int {
        var sequence = 0
        for try await value in try await connection.query(
            "SELECT nextval('magicmirror.change_seq')", logger: logger
        ).decode(Int.self) {
            sequence = value
        }
        let ids = records.map(\.id)
        let versions = records.map(\.version)
        let fields = records.map { ByteBuffer(bytes: $0.fields ?? Data()) }
        let deleted = records.map(\.isDeleted)
        let millis = records.map { Int($0.modified.millis) }
        let counters = records.map { Int($0.modified.counter) }
        let writers = records.map(\.writer)
        let createdMillis = records.map { Int($0.created.millis) }
        let createdCounters = records.map { Int($0.created.counter) }
        try await connection.query(
            """
            INSERT INTO magicmirror.records
                (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq,
                 created_millis, created_counter)
            SELECT \(zoneID), \(key.scope), \(key.owner), r.id, r.version,
                   CASE WHEN r.deleted THEN NULL ELSE r.fields END, r.millis, r.counter, r.writer, \(sequence),
                   r.created_millis, r.created_counter
            FROM unnest(\(ids)::text[], \(versions)::int8[], \(fields)::bytea[], \(deleted)::bool[],
                        \(millis)::int8[], \(counters)::int8[], \(writers)::text[],
                        \(createdMillis)::int8[], \(createdCounters)::int8[])
                AS r(id, version, fields, deleted, millis, counter, writer, created_millis, created_counter)
            ON CONFLICT (zone_id, id) DO UPDATE SET
                version = EXCLUDED.version, fields = EXCLUDED.fields,
                modified_millis = EXCLUDED.modified_millis, modified_counter = EXCLUDED.modified_counter,
                writer = EXCLUDED.writer, seq = EXCLUDED.seq,
                created_millis = EXCLUDED.created_millis, created_counter = EXCLUDED.created_counter
            """, logger: logger)
        try await connection.query(
            "UPDATE magicmirror.zones SET last_seq = \(sequence) WHERE zone_id = \(zoneID)", logger: logger)
        return sequence
    }

    private static func decode(_ rows: PostgresRowSequence) async throws -> [StoredRecord] {
        var records: [StoredRecord] = []
        for try await (id, version, fields, millis, counter, writer, createdMillis, createdCounter) in rows.decode(
            (String, Int, Data?, Int, Int, String, Int, Int).self
        ) {
            records.append(
                StoredRecord(
                    id: id, version: version, fields: fields,
                    modified: HLCTimestamp(millis: Int64(millis), counter: UInt32(clamping: counter)),
                    writer: writer,
                    created: HLCTimestamp(millis: Int64(createdMillis), counter: UInt32(clamping: createdCounter))))
        }
        return records
    }
}
