import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// Reading and writing `magicmirror.assets`, `magicmirror.asset_chunks` and
/// `magicmirror.asset_holds`.
enum AssetRows {
    /// The bytes of one chunk row: what a store sends and a read fetches in one round trip.
    static let chunkSize = 1 << 20

    /// The first key of the advisory locks that say a writer is alive (`pg_locks.classid`);
    /// the second is the writer's ``AssetPresence`` key.
    static let presenceLockSpace: Int32 = 0x4D4D_4153 // "MMAS"

    /// An asset known to be valid: a digest made here from the bytes, a size counted here.
    static func asset(digest: String, size: Int) throws -> Asset {
        try JSONDecoder().decode(Asset.self, from: Data(#"{"$asset":"\#(digest)","size":\#(size)}"#.utf8))
    }

    /// One asset being stored, in the transaction of its connection.
    struct Upload: Sendable {
        let key: ZoneKey
        let zone: ZoneID
        let zoneID: Int
        /// The number its chunks are stored under.
        let content: Int
        private let chunks = Counter()

        /// Starts an upload: makes the zone's row if it has none, draws a content number.
        ///
        /// - Throws: ``MirrorError/Kind/permissionDenied`` for another role's private zone.
        init(
            _ key: ZoneKey, baseGeneration: Int, zone: ZoneID, on connection: PostgresConnection, logger: Logger
        ) async throws {
            self.key = key
            self.zone = zone
            try await ZoneRow.create(key, generation: baseGeneration, on: connection, logger: logger)
            guard let row = try await ZoneRow.read(key, on: connection, logger: logger) else {
                throw MirrorError(
                    .permissionDenied, "role cannot store assets in zone \(zone)",
                    recordType: zone.recordType, scope: zone.scope)
            }
            zoneID = row.zoneID
            var content = 0
            for try await value in try await connection.query(
                "SELECT nextval('magicmirror.asset_content_seq')", logger: logger
            ).decode(Int.self) {
                content = value
            }
            self.content = content
        }

        /// Stores the next chunk.
        func append(_ chunk: Data, on connection: PostgresConnection, logger: Logger) async throws {
            let number = chunks.next()
            try await connection.query(
                """
                INSERT INTO magicmirror.asset_chunks (content, n, scope, owner, data)
                VALUES (\(content), \(number), \(key.scope), \(key.owner), \(ByteBuffer(bytes: chunk)))
                """, logger: logger)
        }

        /// Names the chunks as the asset `digest` of the zone (unless the zone has it
        /// already: the same bytes are kept once), and holds it for `writer` until a record
        /// that refers to it is committed.
        ///
        /// The zone's row is share-locked first, so a collection either ran before (and
        /// what it removed is not relied on here) or runs after and sees the hold.
        func finish(
            digest: String, size: Int, writer: String, lockKey: Int32,
            on connection: PostgresConnection, logger: Logger
        ) async throws {
            try await connection.query(
                "SELECT 1 FROM magicmirror.zones WHERE zone_id = \(zoneID) FOR SHARE", logger: logger)
            var inserted = false
            for try await _ in try await connection.query(
                """
                INSERT INTO magicmirror.assets (zone_id, scope, owner, digest, size, content)
                VALUES (\(zoneID), \(key.scope), \(key.owner), \(digest), \(size), \(content))
                ON CONFLICT (zone_id, digest) DO NOTHING
                RETURNING content
                """, logger: logger
            ).decode(Int.self) {
                inserted = true
            }
            if !inserted {
                try await connection.query(
                    "DELETE FROM magicmirror.asset_chunks WHERE content = \(content)", logger: logger)
            }
            try await connection.query(
                """
                INSERT INTO magicmirror.asset_holds (zone_id, digest, scope, owner, writer, lock_key)
                VALUES (\(zoneID), \(digest), \(key.scope), \(key.owner), \(writer), \(lockKey))
                ON CONFLICT (zone_id, digest, writer) DO UPDATE SET lock_key = EXCLUDED.lock_key
                """, logger: logger)
        }
    }

    /// Where an asset's chunks are: its size and content number, if the zone holds it and
    /// the role can see it.
    static func locate(
        _ digest: String, in key: ZoneKey, on connection: PostgresConnection, logger: Logger
    ) async throws -> (size: Int, content: Int)? {
        let rows = try await connection.query(
            """
            SELECT a.size, a.content FROM magicmirror.assets a
            JOIN magicmirror.zones z ON z.zone_id = a.zone_id
            WHERE z.scope = \(key.scope) AND z.owner = \(key.owner) AND z.record_type = \(key.recordType)
              AND a.digest = \(digest)
            """, logger: logger)
        for try await (size, content) in rows.decode((Int, Int).self) { return (size, content) }
        return nil
    }

    /// Chunk `number` of `content`, or `nil` when there is none.
    static func chunk(
        _ number: Int, of content: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> Data? {
        let rows = try await connection.query(
            "SELECT data FROM magicmirror.asset_chunks WHERE content = \(content) AND n = \(number)", logger: logger)
        for try await data in rows.decode(Data.self) { return data }
        return nil
    }

    /// Removes the zone's assets that no live record refers to and that no live writer
    /// holds, with their chunks, and the holds of writers that are gone. Run in a
    /// transaction: the zone's row stays locked until it ends, so no commit runs meanwhile,
    /// and the removal is read after the lock (a new snapshot), so it sees every commit
    /// made before. Moves the zone's `assets_epoch` when it removes anything, so a commit
    /// that read the zone before tries again.
    ///
    /// - Returns: How many assets were removed.
    static func collect(_ key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        guard let row = try await ZoneRow.lock(key, on: connection, logger: logger) else { return 0 }
        // A writer is alive while its advisory lock (presenceLockSpace, its key) is held.
        let rows = try await connection.query(
            """
            WITH referenced AS (
                SELECT DISTINCT v #>> '{}' AS digest
                FROM magicmirror.records r,
                     LATERAL jsonb_path_query(convert_from(r.fields, 'UTF8')::jsonb, 'strict $.**."$asset"') AS v
                WHERE r.zone_id = \(row.zoneID) AND r.fields IS NOT NULL
                  AND position(convert_to('"$asset"', 'UTF8') IN r.fields) > 0),
            live AS (
                SELECT l.objid::int8 AS lock_key FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.classid = \(Int(presenceLockSpace))::int8::oid
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())),
            held AS (
                SELECT h.digest FROM magicmirror.asset_holds h
                WHERE h.zone_id = \(row.zoneID) AND h.lock_key::int8 IN (SELECT lock_key FROM live)),
            removed AS (
                DELETE FROM magicmirror.assets a
                WHERE a.zone_id = \(row.zoneID)
                  AND NOT EXISTS (SELECT 1 FROM referenced WHERE referenced.digest = a.digest)
                  AND NOT EXISTS (SELECT 1 FROM held WHERE held.digest = a.digest)
                RETURNING a.content),
            chunks AS (
                DELETE FROM magicmirror.asset_chunks c USING removed WHERE c.content = removed.content),
            released AS (
                DELETE FROM magicmirror.asset_holds h
                WHERE h.zone_id = \(row.zoneID) AND h.lock_key::int8 NOT IN (SELECT lock_key FROM live)),
            moved AS (
                UPDATE magicmirror.zones AS z SET assets_epoch = z.assets_epoch + 1
                WHERE z.zone_id = \(row.zoneID) AND EXISTS (SELECT 1 FROM removed))
            SELECT count(*)::int8 FROM removed
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}

/// Numbers the chunks of one upload, from 0.
private final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        value.withLock { value in
            defer { value += 1 }
            return value
        }
    }
}
