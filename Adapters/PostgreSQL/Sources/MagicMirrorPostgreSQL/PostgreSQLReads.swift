import Logging
import MagicMirror
import PostgresNIO

/// Reading a zone's changes in one snapshot, shared by ``PostgreSQLDatabase`` and its
/// listening task.
enum PostgreSQLReads {
    /// The changes of `zone` since `token` (every live record when `token` is `nil`, or of
    /// another generation, or from the future), read in pages of one snapshot so that the
    /// records and the token agree (see ``ZonePages``); and the zone's notification key,
    /// when it exists.
    ///
    /// - Parameter paging: The size of a page, and how long each page may take.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/timedOut`` when a page takes longer
    ///   than `paging.deadline`.
    static func changes(
        in zone: ZoneID, since token: ChangeToken?, link: ServerLink, logger: Logger,
        paging: ZonePages.Paging = .standard
    ) async throws -> (ChangeSet, notifyKey: String?) {
        try zone.validate()
        let key = ZoneKey(zone)
        do {
            if zone.scope == .shared {
                return try await withDeadline(serverDeadline, "reading \(zone)") {
                    try await link.withConnection { connection in
                        try await SharedRows.changes(in: zone, since: token, on: connection, logger: logger)
                    }
                }
            }
            guard let (row, records, isComplete) = try await ZonePages.changes(
                key, since: token, link: link, paging: paging, doing: "reading \(zone)", logger: logger)
            else {
                let complete = token == nil || token != .initial
                return (ChangeSet(records: [], token: .initial, isComplete: complete), nil)
            }
            return (ChangeSet(records: records, token: row.token, isComplete: isComplete), row.notifyKey)
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading \(zone)", zone: zone)
        }
    }
}
