import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// Reading a shared zone and writing shares (the tables and policies are in
/// SharingSchema.swift). Every statement runs as the connection's role: row-level security
/// decides what it sees and may change.
enum SharedRows {
    /// A record shared with the role, with whose it is and what the role may do.
    struct Shared: Sendable {
        let record: StoredRecord
        let owner: String
        let access: String
    }

    /// The shared zone's row and the records shared with its user that are stored, in one
    /// statement (one snapshot). `nil` when nothing was ever shared with the user in that
    /// record type (the zone has no row), or the role is not the zone's user.
    static func read(
        _ zone: ZoneID, on connection: PostgresConnection, logger: Logger
    ) async throws -> (row: ZoneRow, shared: [Shared])? {
        let key = ZoneKey(zone)
        let rows = try await connection.query(
            """
            SELECT z.zone_id, z.generation, z.base_seq, z.last_seq, z.assets_epoch,
                   r.id, r.version, r.fields, r.modified_millis, r.modified_counter, r.writer,
                   r.created_millis, r.created_counter, s.owner, s.access, z.notify_key
            FROM magicmirror.zones z
            LEFT JOIN magicmirror.shares s ON s.recipient = z.owner AND s.record_type = z.record_type
            LEFT JOIN magicmirror.records r ON r.zone_id = s.zone_id AND r.id = s.id AND r.owner = s.owner
                AND r.created_millis = s.created_millis AND r.created_counter = s.created_counter
                AND r.fields IS NOT NULL
            WHERE z.scope = 'shared' AND z.owner = \(key.owner) AND z.record_type = \(key.recordType)
            ORDER BY r.id
            """, logger: logger)
        var row: ZoneRow?
        var shared: [Shared] = []
        for try await (zoneID, generation, base, last, epoch, id, version, fields, millis, counter, writer,
                       createdMillis, createdCounter, owner, access, notifyKey) in rows.decode(
            (Int, Int, Int, Int, Int, String?, Int?, Data?, Int?, Int?, String?, Int?, Int?, String?, String?, String).self
        ) {
            if row == nil {
                row = ZoneRow(
                    zoneID: zoneID, generation: generation, baseSequence: base, lastSequence: last, assetsEpoch: epoch,
                    notifyKey: notifyKey)
            }
            guard let id, let version, let millis, let counter, let writer, let createdMillis, let createdCounter,
                  let owner, let access
            else { continue }
            let record = StoredRecord(
                id: id, version: version, fields: fields,
                modified: HLCTimestamp(millis: Int64(millis), counter: UInt32(clamping: counter)), writer: writer,
                created: HLCTimestamp(millis: Int64(createdMillis), counter: UInt32(clamping: createdCounter)))
            shared.append(Shared(record: record, owner: owner, access: access))
        }
        return row.map { ($0, shared) }
    }

    /// The changes of a shared zone since `token`: nothing when the token is the zone's,
    /// the complete shared set otherwise (a shared zone keeps no history of its own).
    static func changes(
        in zone: ZoneID, since token: ChangeToken?, on connection: PostgresConnection, logger: Logger
    ) async throws -> (ChangeSet, notifyKey: String?) {
        guard let (row, shared) = try await read(zone, on: connection, logger: logger) else {
            return (ChangeSet(records: [], token: .initial, isComplete: token != .initial), nil)
        }
        if let token, token == row.token {
            return (ChangeSet(records: [], token: token, isComplete: false), row.notifyKey)
        }
        return (ChangeSet(records: shared.map(\.record), token: row.token, isComplete: true), row.notifyKey)
    }

    /// Shares the live records `ids` of the role's private zone `zone` with `recipient`, in
    /// one transaction: all of them, or none.
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` for ids not stored (or not visible: another
    ///   role's zone); ``MirrorError/Kind/refused`` when the recipient has one of the ids
    ///   from another owner (the server refuses to overwrite a share the role cannot see).
    static func share(
        _ ids: [String], in zone: ZoneID, with recipient: String, access: ShareAccess,
        link: ServerLink, logger: Logger
    ) async throws {
        let key = ZoneKey(zone)
        do {
            try await link.withTransaction(logger: logger) { connection in
                var found = Set<RecordKey>()
                let rows = try await connection.query(
                    """
                    INSERT INTO magicmirror.shares
                        (zone_id, owner, record_type, id, recipient, access, created_millis, created_counter)
                    SELECT r.zone_id, r.owner, z.record_type, r.id, \(recipient), \(access.rawValue),
                           r.created_millis, r.created_counter
                    FROM magicmirror.zones z JOIN magicmirror.records r ON r.zone_id = z.zone_id
                    WHERE z.scope = 'private' AND z.owner = \(key.owner) AND z.record_type = \(key.recordType)
                      AND r.id = ANY(\(ids)::text[]) AND r.fields IS NOT NULL
                    ON CONFLICT (recipient, record_type, id) DO UPDATE SET
                        access = EXCLUDED.access, zone_id = EXCLUDED.zone_id,
                        created_millis = EXCLUDED.created_millis, created_counter = EXCLUDED.created_counter
                    RETURNING id
                    """, logger: logger)
                for try await id in rows.decode(String.self) { found.insert(RecordKey(id)) }
                let missing = ids.filter { !found.contains(RecordKey($0)) }
                guard missing.isEmpty else {
                    throw MirrorError(
                        .notFound,
                        "cannot share what is not stored: \(missing.map { String(reflecting: $0) }.joined(separator: ", ")) "
                            + "of \(key.owner) (save the record first; nothing was shared)",
                        recordIDs: missing, recordType: zone.recordType, scope: .private)
                }
            }
        } catch {
            let mirrorError = PostgreSQLErrors.mirrorError(error, "sharing records of \(zone) with \(recipient)", zone: zone)
            guard mirrorError.kind == .permissionDenied else { throw mirrorError }
            // The only row the policies hide from an owner's upsert: a share of the same id
            // with the same recipient by another owner.
            throw MirrorError(
                .refused,
                "\(recipient) already has a record of type \(zone.recordType) with one of the ids "
                    + "\(ids.map { String(reflecting: $0) }.joined(separator: ", ")) shared by another user: "
                    + "a shared mirror shows one record per id (nothing was shared)",
                recordIDs: ids, recordType: zone.recordType, scope: .shared, underlying: mirrorError)
        }
    }

    /// Ends the role's shares of `ids` of `zone` with `recipient`.
    static func revoke(
        _ ids: [String], in zone: ZoneID, from recipient: String, link: ServerLink, logger: Logger
    ) async throws {
        let key = ZoneKey(zone)
        do {
            // Through the link, so that a relay's request runs as its user (never as the
            // relay's own role, which owns no share and would revoke nothing).
            try await link.withConnection { connection in
                _ = try await connection.query(
                    """
                    DELETE FROM magicmirror.shares
                    WHERE owner = \(key.owner) AND record_type = \(key.recordType) AND recipient = \(recipient)
                      AND id = ANY(\(ids)::text[])
                    """, logger: logger)
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "revoking shares of \(zone) from \(recipient)", zone: zone)
        }
    }

    /// The shares of the role's private zone `zone` whose records are stored.
    static func shares(
        of zone: ZoneID, on connection: PostgresConnection, logger: Logger
    ) async throws -> [(id: String, recipient: String, access: String)] {
        let key = ZoneKey(zone)
        let rows = try await connection.query(
            """
            SELECT s.id, s.recipient, s.access
            FROM magicmirror.shares s JOIN magicmirror.records r ON r.zone_id = s.zone_id AND r.id = s.id
                AND r.created_millis = s.created_millis AND r.created_counter = s.created_counter
                AND r.fields IS NOT NULL
            WHERE s.owner = \(key.owner) AND s.record_type = \(key.recordType)
            """, logger: logger)
        var shares: [(String, String, String)] = []
        for try await share in rows.decode((String, String, String).self) { shares.append(share) }
        return shares
    }
}
