import Logging
import MagicMirror
import PostgresNIO

/// Administration, and the limit of a record's size.
extension PostgreSQLDatabase {
    /// Drops the zone's tombstones and starts a new generation of its history, as the
    /// JSON-file database's compaction does: readers with an older token reload the zone.
    ///
    /// Only the role that owns the schema may do this (other roles have no `DELETE`).
    ///
    /// - Parameter zone: The zone to compact.
    /// - Throws: ``MirrorError/Kind/permissionDenied`` for another role.
    public func compactHistory(of zone: ZoneID) async throws {
        try zone.validate()
        let key = ZoneKey(zone)
        let logger = logger
        do {
            try await link.withTransaction(logger: logger) { connection in
                // The zone's commit lock, then its row, as every writer takes them: a record
                // written meanwhile is checked (record_sequenced) after the tombstones are gone.
                let locked = try await RelationshipRows.lockZones(
                    of: key, types: [key.recordType], on: connection, logger: logger)
                guard let row = locked[key.recordType] else { return }
                try await connection.query(
                    "DELETE FROM magicmirror.records WHERE zone_id = \(row.zoneID) AND fields IS NULL",
                    logger: logger)
                try await connection.query(
                    """
                    UPDATE magicmirror.zones SET generation = generation + 1, base_seq = last_seq
                    WHERE zone_id = \(row.zoneID)
                    """, logger: logger)
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "compacting \(zone)", zone: zone)
        }
    }
}

extension PostgreSQLDatabase {
    /// The largest record this database commits: 64 MiB of fields, as encoded.
    ///
    /// A record travels whole, as one parameter of one statement, and is held several times
    /// over on its way (the encoded fields, the statement's buffer, the driver's): a 300 MB
    /// record took the client to 2 GB. Keep large data in assets, which are stored and read
    /// in pieces (see ``PostgreSQLDatabase/storeAsset(contentsOf:in:)``).
    public static let maximumRecordSize = 64 << 20

    /// Refuses, before anything is sent, a commit with a record over ``maximumRecordSize``.
    static func refuseOversizedRecords(_ operations: [RecordOperation], in zone: ZoneID) throws(MirrorError) {
        let oversized = operations.filter { operation in
            if case .save(let fields) = operation.action { return fields.count > maximumRecordSize }
            return false
        }
        guard let first = oversized.first, case .save(let fields) = first.action else { return }
        throw MirrorError(
            .invalidRecord,
            "record \(first.recordID) is \(fields.count) bytes, over the \(maximumRecordSize >> 20) MiB a record "
                + "may have on PostgreSQL: keep large data in an asset (storeAsset), which is stored in pieces; "
                + "nothing of this commit was stored",
            recordIDs: oversized.map(\.recordID), recordType: zone.recordType, scope: zone.scope)
    }
}

