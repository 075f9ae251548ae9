import Foundation
import MagicMirror

/// A temporary database enforces delete rules through its JSON-file
/// ``TemporaryDatabase/database``, so record types with ``Reference`` fields and
/// `deleteRules` can be tested on it.
extension TemporaryDatabase: RelationshipDatabase {
    /// Stores the rules through ``database`` (see
    /// `RelationshipDatabase.registerDeleteRules(_:referringType:in:)`).
    public func registerDeleteRules(_ rules: [StoredDeleteRule], referringType: String, in zone: ZoneID) async throws {
        try await database.registerDeleteRules(rules, referringType: referringType, in: zone)
    }
}

/// A temporary database shares records through its JSON-file
/// ``TemporaryDatabase/database``, so `Mirror.share(_:with:access:)` and mirrors of the
/// shared scope can be tested on it.
extension TemporaryDatabase: SharingDatabase {
    /// Shares through ``database`` (see `SharingDatabase.share(_:in:with:access:)`).
    public func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws {
        try await database.share(recordIDs, in: zone, with: recipient, access: access)
    }

    /// Revokes through ``database`` (see `SharingDatabase.revokeShares(of:in:from:)`).
    public func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws {
        try await database.revokeShares(of: recordIDs, in: zone, from: recipient)
    }

    /// Reads through ``database`` (see `SharingDatabase.shares(in:)`).
    public func shares(in zone: ZoneID) async throws -> [RecordShare] {
        try await database.shares(in: zone)
    }
}
