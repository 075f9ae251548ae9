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
    /// How many times a collection removed assets of the zone: a commit that read the zone
    /// before one did plans again, so it cannot refer to an asset the collection removed.
    let assetsEpoch: Int
    /// The zone's notification key, when read: the tag of its notifications is made of it
    /// (see ``NotificationPayload``).
    var notifyKey: String? = nil

    /// The zone's token: ``ChangeToken/initial`` until its first commit.
    var token: ChangeToken {
        lastSequence == 0 && baseSequence == 0 ? .initial : ChangeToken(generation: generation, sequence: lastSequence)
    }

    /// The row after a change with sequence number `sequence` (written under its lock).
    func moved(to sequence: Int) -> ZoneRow {
        ZoneRow(
            zoneID: zoneID, generation: generation, baseSequence: baseSequence, lastSequence: sequence,
            assetsEpoch: assetsEpoch, notifyKey: notifyKey)
    }

    /// Whether a reader with `token` can continue from it with the changes after it: the
    /// token is of the zone's generation and within the history the zone keeps (not
    /// before its base, not from the future).
    func canContinue(from token: ChangeToken) -> Bool {
        token.generation == self.token.generation && token.sequence >= baseSequence
            && token.sequence <= self.token.sequence
    }

    /// The zone's row, if it exists and the role can see it.
    static func read(_ key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> ZoneRow? {
        try await first(
            connection.query(
                """
                SELECT zone_id, generation, base_seq, last_seq, assets_epoch FROM magicmirror.zones
                WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = \(key.recordType)
                """, logger: logger))
    }

    /// Creates the zone's row with the given first generation, unless it exists. Row-level
    /// security refuses another role's private zone here.
    static func create(_ key: ZoneKey, generation: Int, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO magicmirror.zones (scope, owner, record_type, generation)
            VALUES (\(key.scope), \(key.owner), \(key.recordType), \(generation))
            ON CONFLICT (scope, owner, record_type) DO NOTHING
            """, logger: logger)
    }

    /// The zone's row, locked until the transaction ends: commits to one zone take turns,
    /// so sequence numbers become visible in the order they were drawn.
    static func lock(_ key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> ZoneRow? {
        try await first(
            connection.query(
                """
                SELECT zone_id, generation, base_seq, last_seq, assets_epoch FROM magicmirror.zones
                WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = \(key.recordType)
                FOR UPDATE
                """, logger: logger))
    }

    private static func first(_ rows: PostgresRowSequence) async throws -> ZoneRow? {
        for try await (zoneID, generation, base, last, epoch) in rows.decode((Int, Int, Int, Int, Int).self) {
            return ZoneRow(zoneID: zoneID, generation: generation, baseSequence: base, lastSequence: last, assetsEpoch: epoch)
        }
        return nil
    }
}

/// Reading and writing `magicmirror.records`, each read or write one statement (one round
/// trip to the server).
enum RecordRows {
    /// The columns of a ``StoredRecord`` in `magicmirror.records AS r`, in the order
    /// ``record(_:)`` reads them.
    static let columns =
        "r.id, r.version, r.fields, r.modified_millis, r.modified_counter, r.writer, r.created_millis, r.created_counter"

    /// A record's columns as read beside its zone's by an outer join: all `NULL` when the
    /// zone has no record that matched.
    typealias Columns = (String?, Int?, Data?, Int?, Int?, String?, Int?, Int?)

    /// The zone's row and its stored records (tombstones included) among `ids`, read in one
    /// statement, so in one snapshot: the records are exactly those of the zone's token.
    /// `nil` when the zone does not exist or the role cannot see it.
    ///
    /// Ids are compared by their UTF-8 bytes (`"e\u{301}"` and `"\u{e9}"` are two records),
    /// as the server's `"C"` collation does, not by Swift's canonical equivalence.
    static func zoneAndRecords(
        _ key: ZoneKey, ids: [String], on connection: PostgresConnection, logger: Logger
    ) async throws -> (row: ZoneRow, records: [RecordKey: StoredRecord])? {
        let rows = try await connection.query(
            """
            SELECT z.zone_id, z.generation, z.base_seq, z.last_seq, z.assets_epoch, \(unescaped: columns),
                   z.notify_key
            FROM magicmirror.zones z
            LEFT JOIN magicmirror.records r ON r.zone_id = z.zone_id AND r.id = ANY(\(ids)::text[])
            WHERE z.scope = \(key.scope) AND z.owner = \(key.owner) AND z.record_type = \(key.recordType)
            """, logger: logger)
        guard let (row, records) = try await zoneAndRecords(rows) else { return nil }
        var found: [RecordKey: StoredRecord] = [:]
        for record in records { found[RecordKey(record.id)] = record }
        return (row, found)
    }

    /// What ``write(_:over:key:writer:on:logger:)`` did.
    enum WriteOutcome: Sendable {
        /// Stored as the change with this sequence number.
        case written(Int)
        /// Nothing stored: another commit, or a collection of assets, went first.
        case moved
        /// Nothing stored: record `id` refers to an asset with `value`, which is no digest.
        case invalidReference(id: String, value: String)
        /// Nothing stored: the records `ids` refer to the assets `digests`, which the zone
        /// does not hold.
        case missingAssets(ids: [String], digests: [String])
    }

    /// The bytes `"$asset"`: fields without them refer to no asset, and the server does not
    /// parse them.
    private static let assetMarker = Data(#""$asset""#.utf8)

    /// Stores `records` as one change of a ``LinkedCommit`` (which holds the zone's row; a
    /// plain commit is ``CommitRows``), in one statement, if the zone is still as `row`
    /// shows it and every asset they refer to is stored in the zone: locks the zone's row,
    /// and when its generation, sequences and assets epoch are those of `row` (no other
    /// commit and no collection since `row` was read), draws the next number of the
    /// server's sequence, upserts every record with it, moves the zone's last sequence,
    /// releases `writer`'s holds on the assets the records refer to, and sends the
    /// `NOTIFY`. A commit that ran meanwhile holds the lock first and moves the sequence,
    /// and this statement then writes nothing.
    ///
    /// The server finds the assets a record refers to (every JSON object with the key
    /// `"$asset"`, at any depth) in the fields of the records that contain `"$asset"`.
    static func write(
        _ records: [StoredRecord], over row: ZoneRow, key: ZoneKey, writer: String,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> WriteOutcome {
        let ids = records.map(\.id)
        let versions = records.map(\.version)
        let fields = records.map { ByteBuffer(bytes: $0.fields ?? Data()) }
        let deleted = records.map(\.isDeleted)
        let millis = records.map { Int($0.modified.millis) }
        let counters = records.map { Int($0.modified.counter) }
        let writers = records.map(\.writer)
        let createdMillis = records.map { Int($0.created.millis) }
        let createdCounters = records.map { Int($0.created.counter) }
        let referring = records.filter { $0.fields?.range(of: assetMarker) != nil }
        let referringIDs = referring.map(\.id)
        let referringFields = referring.map { ByteBuffer(bytes: $0.fields ?? Data()) }
        // The payload is NotificationPayload's text, made by the server once it drew the
        // sequence, of the zone's notification key.
        let rows = try await connection.query(
            """
            WITH refs AS (
                SELECT f.id, v FROM unnest(\(referringIDs)::text[], \(referringFields)::bytea[]) AS f(id, fields),
                     LATERAL jsonb_path_query(convert_from(f.fields, 'UTF8')::jsonb, 'strict $.**."$asset"') AS v),
            invalid AS (
                SELECT id, v::text AS value FROM refs
                WHERE jsonb_typeof(v) <> 'string' OR (v #>> '{}') !~ '^[0-9a-f]{64}$'),
            missing AS (
                SELECT refs.id, v #>> '{}' AS digest FROM refs
                WHERE NOT EXISTS (SELECT 1 FROM invalid) AND NOT EXISTS (
                    SELECT 1 FROM magicmirror.assets a WHERE a.zone_id = \(row.zoneID) AND a.digest = v #>> '{}')),
            locked AS (
                SELECT zone_id, notify_key FROM magicmirror.zones
                WHERE zone_id = \(row.zoneID) AND generation = \(row.generation)
                  AND base_seq = \(row.baseSequence) AND last_seq = \(row.lastSequence)
                  AND assets_epoch = \(row.assetsEpoch)
                  AND NOT EXISTS (SELECT 1 FROM invalid) AND NOT EXISTS (SELECT 1 FROM missing)
                FOR UPDATE),
            drawn AS (SELECT nextval('magicmirror.change_seq') AS seq, notify_key FROM locked),
            written AS (
                INSERT INTO magicmirror.records
                    (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq,
                     created_millis, created_counter)
                SELECT \(row.zoneID), \(key.scope), \(key.owner), r.id, r.version,
                       CASE WHEN r.deleted THEN NULL ELSE r.fields END, r.millis, r.counter, r.writer, drawn.seq,
                       r.created_millis, r.created_counter
                FROM drawn, unnest(\(ids)::text[], \(versions)::int8[], \(fields)::bytea[], \(deleted)::bool[],
                                  \(millis)::int8[], \(counters)::int8[], \(writers)::text[],
                                  \(createdMillis)::int8[], \(createdCounters)::int8[])
                    AS r(id, version, fields, deleted, millis, counter, writer, created_millis, created_counter)
                ON CONFLICT (zone_id, id) DO UPDATE SET
                    version = EXCLUDED.version, fields = EXCLUDED.fields,
                    modified_millis = EXCLUDED.modified_millis, modified_counter = EXCLUDED.modified_counter,
                    writer = EXCLUDED.writer, seq = EXCLUDED.seq,
                    created_millis = EXCLUDED.created_millis, created_counter = EXCLUDED.created_counter
                RETURNING 1),
            -- After the records (it reads what they returned): each record's sequence must be
            -- after the zone's last when it is written (record_sequenced).
            moved AS (
                UPDATE magicmirror.zones AS z SET last_seq = drawn.seq FROM drawn
                WHERE z.zone_id = \(row.zoneID) AND (SELECT count(*) FROM written) >= 0),
            released AS (
                DELETE FROM magicmirror.asset_holds h USING drawn
                WHERE h.zone_id = \(row.zoneID) AND h.writer = \(writer)
                  AND h.digest IN (SELECT v #>> '{}' FROM refs)),
            notified AS (
                SELECT pg_notify(\(NotificationPayload.channel), magicmirror.notification(drawn.notify_key, drawn.seq))
                FROM drawn)
            SELECT (SELECT seq FROM drawn), (SELECT count(*) FROM notified),
                   (SELECT id FROM invalid LIMIT 1), (SELECT value FROM invalid LIMIT 1),
                   (SELECT array_agg(DISTINCT id) FROM missing), (SELECT array_agg(DISTINCT digest) FROM missing)
            """, logger: logger)
        for try await (sequence, _, invalidID, invalidValue, missingIDs, missingDigests) in rows.decode(
            (Int?, Int, String?, String?, [String]?, [String]?).self
        ) {
            if let sequence { return .written(sequence) }
            if let invalidID { return .invalidReference(id: invalidID, value: invalidValue ?? "") }
            if let missingDigests, !missingDigests.isEmpty {
                return .missingAssets(ids: missingIDs ?? [], digests: missingDigests)
            }
        }
        return .moved
    }

    /// Reads the rows of a zone-and-records query: the zone's columns on every row, a
    /// record's (or `NULL`s) after them, then the zone's notification key.
    private static func zoneAndRecords(_ rows: PostgresRowSequence) async throws -> (ZoneRow, [StoredRecord])? {
        var zone: ZoneRow?
        var records: [StoredRecord] = []
        for try await (zoneID, generation, base, last, epoch, id, version, fields, millis, counter, writer,
                       createdMillis, createdCounter, notifyKey) in rows.decode(
            (Int, Int, Int, Int, Int, String?, Int?, Data?, Int?, Int?, String?, Int?, Int?, String).self
        ) {
            if zone == nil {
                zone = ZoneRow(
                    zoneID: zoneID, generation: generation, baseSequence: base, lastSequence: last, assetsEpoch: epoch,
                    notifyKey: notifyKey)
            }
            if let record = record((id, version, fields, millis, counter, writer, createdMillis, createdCounter)) {
                records.append(record)
            }
        }
        return zone.map { ($0, records) }
    }

    /// The record in a row's record columns; `nil` when they are `NULL` (no record joined).
    static func record(_ columns: Columns) -> StoredRecord? {
        guard let id = columns.0, let version = columns.1, let millis = columns.3, let counter = columns.4,
              let writer = columns.5, let createdMillis = columns.6, let createdCounter = columns.7
        else { return nil }
        return StoredRecord(
            id: id, version: version, fields: columns.2,
            modified: HLCTimestamp(millis: Int64(millis), counter: UInt32(clamping: counter)),
            writer: writer,
            created: HLCTimestamp(millis: Int64(createdMillis), counter: UInt32(clamping: createdCounter)))
    }
}
