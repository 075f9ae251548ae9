import Logging
import MagicMirror
import PostgresNIO

/// Reading a zone's changes in one snapshot, shared by ``PostgreSQLDatabase`` and its
/// listening task.
enum PostgreSQLReads {
    /// The changes of `zone` since `token` (every live record when `token` is `nil`, or of
    /// another generation, or from the future), read in one repeatable-read transaction so
    /// that the records and the token agree; and the zone's row number, when it exists.
    ///
    /// - Throws: A ``MirrorError``.
    static func changes(
        in zone: ZoneID, since token: ChangeToken?, client: PostgresClient, logger: Logger
    ) async throws -> (ChangeSet, zoneRow: Int?) {
        try zone.validate()
        let key = ZoneKey(zone)
        do {
            return try await withDeadline(serverDeadline, "reading \(zone)") {
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                guard let row = try await ZoneRow.read(key, on: connection, logger: logger) else {
                    let complete = token == nil || token != .initial
                    return (ChangeSet(records: [], token: .initial, isComplete: complete), nil)
                }
                let current = row.token
                if let token, token.generation == current.generation, token.sequence >= row.baseSequence,
                   token.sequence <= current.sequence {
                    let records = try await RecordRows.changed(
                        zoneID: row.zoneID, after: token.sequence, on: connection, logger: logger)
                    return (ChangeSet(records: records, token: current, isComplete: false), row.zoneID)
                }
                let records = try await RecordRows.live(zoneID: row.zoneID, on: connection, logger: logger)
                return (ChangeSet(records: records, token: current, isComplete: true), row.zoneID)
            }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading \(zone)", zone: zone)
        }
    }
}
