import Foundation
import MagicMirror

// Sharing through the relay (`/v1/share`, `/v1/revoke`, `/v1/shares`): the relay runs each
// request as the token's subject, and PostgreSQL's row-level security decides, as for a
// direct connection. A zone of another user is refused by the relay (403).

extension RelayDatabase: SharingDatabase {
    /// Shares records of the user's private zone with another user (see ``SharingDatabase``).
    ///
    /// - Parameters:
    ///   - recordIDs: The ids of the records to share; they must be stored in `zone`.
    ///   - zone: A private zone of ``user``.
    ///   - recipient: The user to share them with.
    ///   - access: What the recipient may do with them.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/permissionDenied`` for a zone of
    ///   another user, ``MirrorError/Kind/notFound`` for a record that is not stored,
    ///   ``MirrorError/Kind/refused`` for the owner as recipient or an id that another owner
    ///   already shares with the recipient, ``MirrorError/Kind/unsupported`` for a zone that
    ///   is not private; nothing is shared then.
    public func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        try zone.validate()
        _ = try await transport.post(
            "share", RelayWire.ShareRequest(zone: zone, ids: recordIDs, recipient: recipient.name, access: access),
            as: RelayWire.Done.self)
    }

    /// Stops sharing records of the user's private zone with another user.
    ///
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/permissionDenied`` for a zone of
    ///   another user, ``MirrorError/Kind/unsupported`` for a zone that is not private.
    public func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws {
        try zone.validate()
        _ = try await transport.post(
            "revoke", RelayWire.RevokeRequest(zone: zone, ids: recordIDs, recipient: recipient.name), as: RelayWire.Done.self)
    }

    /// The shares in effect of the user's private zone (with every recipient) or shared zone
    /// (by every owner).
    ///
    /// - Returns: The shares, ordered by record id, then owner and recipient.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/permissionDenied`` for a zone of
    ///   another user, ``MirrorError/Kind/unsupported`` for a public zone.
    public func shares(in zone: ZoneID) async throws -> [RecordShare] {
        try zone.validate()
        return try await transport.post("shares", RelayWire.SharesRequest(zone: zone), as: RelayWire.Shares.self)
            .shares.compactMap(\.recordShare)
    }
}
