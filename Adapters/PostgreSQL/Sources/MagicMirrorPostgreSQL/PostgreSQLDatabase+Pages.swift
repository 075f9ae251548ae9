import Logging
import MagicMirror
import PostgresNIO

extension PostgreSQLDatabase {
    /// One page of a zone's live records for `mirror-relay`'s `/v1/records`: up to `limit`
    /// records after `cursor`, in the order of their last change, each page one statement
    /// that reads where the last one ended (the index of ``ZonePages``), never the zone
    /// again.
    ///
    /// Each page is of its own moment: its token is the zone's then. A record changed
    /// between two pages comes again in a later page; a client that sees two tokens differ
    /// brings the pages to one moment with the changes since the first (as `RelayDatabase`
    /// does).
    ///
    /// Not API: for `mirror-relay`. Not for shared zones (read those whole).
    ///
    /// - Parameters:
    ///   - zone: A public or private zone.
    ///   - cursor: `nil` for the first page, else the `next` of the page before.
    ///   - limit: Records in the page at most (at least 1).
    /// - Returns: The records, the zone's token, and the cursor of the next page, `nil`
    ///   after the last.
    /// - Throws: A ``MirrorError``: `unsupportedFormat` for a cursor this method did not
    ///   make or a shared zone; what reading throws.
    @_spi(Relay) public func livePage(
        in zone: ZoneID, after cursor: String?, limit: Int
    ) async throws -> (records: [StoredRecord], token: ChangeToken, next: String?) {
        try zone.validate()
        guard zone.scope != .shared else {
            throw MirrorError(
                .unsupportedFormat, "a shared zone is read whole, not in pages", recordType: zone.recordType, scope: zone.scope)
        }
        let after = try cursor.map(Self.pagePosition)
        let paging = { var paging = ZonePages.Paging.standard; paging.rows = max(1, limit); return paging }()
        let key = ZoneKey(zone)
        let (link, logger) = (link, logger)
        do {
            let page = try await withDeadline(paging.deadline, "reading \(zone)") {
                try await link.withConnection { connection in
                    try await ZonePages.page(key, since: nil, after: after, paging: paging, on: connection, logger: logger)
                        .map { page in (page.records, page.row.token, page.next.map { "\($0.seq):\($0.id)" }) }
                }
            }
            return page ?? ([], .initial, nil)
        } catch {
            throw explainingOtherUsersZone(PostgreSQLErrors.mirrorError(error, "reading \(zone)", zone: zone), zone)
        }
    }

    /// The position a page's cursor names: `SEQ:ID`.
    private static func pagePosition(_ cursor: String) throws -> (seq: Int, id: String) {
        guard let colon = cursor.firstIndex(of: ":"), let seq = Int(cursor[..<colon]), seq >= 0 else {
            throw MirrorError(.unsupportedFormat, "\(cursor.prefix(80)) is not a page's cursor (the next of the page before)")
        }
        return (seq, String(cursor[cursor.index(after: colon)...]))
    }
}
