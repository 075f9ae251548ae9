import Logging
import MagicMirror
import PostgresNIO

/// Reading a zone's changes in one snapshot, shared by ``PostgreSQLDatabase`` and its
/// listening task.
enum PostgreSQLReads {
    /// The changes of `zone` since `token` (every live record when `token` is `nil`, or of
    /// another generation, or from the future), read in one statement so that the records
    /// and the token agree; and the zone's notification key, when it exists.
    ///
    /// - Throws: A ``MirrorError``.
    static func changes(
        in zone: ZoneID, since token: ChangeToken?, link: ServerLink, logger: Logger
    ) async throws -> (ChangeSet, notifyKey: String?) {
        try zone.validate()
        let key = ZoneKey(zone)
        do {
            return try await withDeadline(serverDeadline, "reading \(zone)") {
                try await link.withConnection { connection in
                    if zone.scope == .shared {
                        return try await SharedRows.changes(in: zone, since: token, on: connection, logger: logger)
                    }
                    guard let (row, records, isComplete) = try await RecordRows.changes(
                        key, since: token, on: connection, logger: logger)
                    else {
                        let complete = token == nil || token != .initial
                        return (ChangeSet(records: [], token: .initial, isComplete: complete), nil)
                    }
                    return (ChangeSet(records: records, token: row.token, isComplete: isComplete), row.notifyKey)
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading \(zone)", zone: zone)
        }
    }
}
