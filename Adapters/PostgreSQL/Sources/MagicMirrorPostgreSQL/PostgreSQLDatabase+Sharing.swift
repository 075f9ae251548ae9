import MagicMirror
import PostgresNIO

// Sharing, enforced by the server (SharingSchema.swift): the statements run as the
// connection's role, so a role shares, revokes and lists only its own records' shares and
// reads only what is shared with it, whatever this code asks.

extension PostgreSQLDatabase {
    /// Shares records of the role's private zone with another role (see
    /// ``SharingDatabase``).
    ///
    /// - Parameters:
    ///   - recordIDs: The ids of the records to share; they must be stored in `zone`.
    ///   - zone: A private zone of the connection's role.
    ///   - recipient: The role to share them with.
    ///   - access: What the recipient may do with them.
    /// - Throws: ``MirrorError/Kind/notFound`` for a record that is not stored (or a zone of
    ///   another role) and for a recipient that is no role of the server (the server
    ///   refuses a share with a role that does not exist), ``MirrorError/Kind/refused`` for the owner as recipient or an id
    ///   another owner shares with the recipient, ``MirrorError/Kind/unsupported`` for a
    ///   zone that is not private; nothing is shared then.
    public func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        try checkSharing(recordIDs, of: zone)
        guard recipient.name != zone.user else {
            throw MirrorError(
                .refused, "\(recipient) owns the records of \(zone): a record is not shared with its owner",
                recordType: zone.recordType, scope: .private)
        }
        guard !recordIDs.isEmpty else { return }
        let (link, logger) = (link, logger)
        try await withDeadline(serverDeadline, "sharing records of \(zone)") {
            try await SharedRows.share(recordIDs, in: zone, with: recipient.name, access: access, link: link, logger: logger)
        }
    }

    /// Ends shares of records of the role's private zone with another role (see
    /// ``SharingDatabase``).
    ///
    /// - Parameters:
    ///   - recordIDs: The ids of the records to stop sharing.
    ///   - zone: A private zone of the connection's role.
    ///   - recipient: The role to stop sharing them with.
    /// - Throws: ``MirrorError/Kind/unsupported`` for a zone that is not private; a
    ///   ``MirrorError`` when the server cannot be reached.
    public func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws {
        try checkSharing(recordIDs, of: zone)
        guard !recordIDs.isEmpty else { return }
        let (link, logger) = (link, logger)
        try await withDeadline(serverDeadline, "revoking shares of \(zone)") {
            try await SharedRows.revoke(recordIDs, in: zone, from: recipient.name, link: link, logger: logger)
        }
    }

    /// The shares in effect of a private zone of the role (with every recipient), or of a
    /// shared zone of the role (by every owner).
    ///
    /// - Parameter zone: A private or shared zone.
    /// - Returns: The shares, ordered by record id, then owner and recipient.
    /// - Throws: ``MirrorError/Kind/unsupported`` for a public zone; a ``MirrorError`` when
    ///   the server cannot be reached.
    public func shares(in zone: ZoneID) async throws -> [RecordShare] {
        try zone.validate()
        let (link, logger) = (link, logger)
        let found: [(id: String, owner: String, recipient: String, access: String)]
        do {
            found = try await withDeadline(serverDeadline, "listing the shares of \(zone)") {
                try await link.withConnection { connection in
                    switch zone.scope {
                    case .private:
                        return try await SharedRows.shares(of: zone, on: connection, logger: logger).map {
                            ($0.id, zone.user ?? "", $0.recipient, $0.access)
                        }
                    case .shared:
                        return try await SharedRows.read(zone, on: connection, logger: logger)?.shared.map {
                            ($0.record.id, $0.owner, zone.user ?? "", $0.access)
                        } ?? []
                    case .public:
                        throw MirrorError(
                            .unsupported, "public records are not shared: every user reads them",
                            recordType: zone.recordType, scope: .public)
                    }
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "listing the shares of \(zone)", zone: zone)
        }
        return found.compactMap { share in
            guard let owner = try? MirrorUser(name: share.owner), let recipient = try? MirrorUser(name: share.recipient),
                  let access = ShareAccess(rawValue: share.access)
            else { return nil }
            return RecordShare(recordID: share.id, recordType: zone.recordType, owner: owner, recipient: recipient, access: access)
        }.sorted { left, right in
            if left.recordID.utf8.elementsEqual(right.recordID.utf8) {
                return (left.owner.name, left.recipient.name) < (right.owner.name, right.recipient.name)
            }
            return left.recordID.utf8.lexicographicallyPrecedes(right.recordID.utf8)
        }
    }

    /// The records with the given ids among those shared with the zone's user.
    func fetchShared(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        let all = try await fetchAll(in: zone).records
        var byID: [RecordKey: StoredRecord] = [:]
        for record in all { byID[RecordKey(record.id)] = record }
        return recordIDs.compactMap { byID[RecordKey($0)] }
    }

    private func checkSharing(_ recordIDs: [String], of zone: ZoneID) throws {
        try zone.validate()
        guard zone.scope == .private else {
            throw MirrorError(
                .unsupported, "only private records are shared (by their owner); \(zone) is not private",
                recordType: zone.recordType, scope: zone.scope)
        }
        try RecordOperation.validate(
            recordIDs.map { .delete($0, baseVersion: 0, timestamp: .zero) }, in: zone)
    }
}
