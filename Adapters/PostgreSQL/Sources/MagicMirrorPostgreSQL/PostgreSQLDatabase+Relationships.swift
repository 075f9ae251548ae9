import Logging
@_spi(DatabaseImplementation) import MagicMirror
import PostgresNIO

/// Delete rules on the server (see the article "Running on PostgreSQL"): stored in
/// `magicmirror.delete_rules`, enforced by every commit that deletes a record of a type they
/// target (`LinkedCommit`).
extension PostgreSQLDatabase: RelationshipDatabase {
    /// Stores the delete rules of `referringType` in the scope space of `zone`, replacing the
    /// type's earlier rules there, in one statement: every process that commits to the
    /// database enforces them from then on.
    ///
    /// A private scope space's rules are rows of its user's, which row-level security keeps
    /// from every other role. A shared zone stores none: its records live in their owners'
    /// private zones, under their owners' rules.
    ///
    /// - Parameters:
    ///   - rules: The rules; each one's ``StoredDeleteRule/referringType`` is `referringType`.
    ///   - referringType: The record type that declares them.
    ///   - zone: A zone of the scope space (the referring type's zone).
    /// - Throws: ``MirrorError/Kind/invalidName`` or ``MirrorError/Kind/invalidRecord`` for a
    ///   rule that is not valid; ``MirrorError/Kind/permissionDenied`` for another role's
    ///   private scope; ``MirrorError/Kind/unavailable`` when the server cannot be reached.
    ///   Nothing is stored then.
    public func registerDeleteRules(
        _ rules: [StoredDeleteRule], referringType: String, in zone: ZoneID
    ) async throws {
        try zone.validate()
        try RelationshipEnforcement.check(rules, referringType: referringType)
        // A shared zone is a recipient's view of records that live in their owners' private
        // zones: it stores no record, so no rule either (the owners' rules apply there).
        guard zone.scope != .shared else { return }
        let key = ZoneKey(zone)
        let fields = rules.map(\.field)
        let cardinalities = rules.map(\.cardinality.rawValue)
        let targets = rules.map(\.targetType)
        let actions = rules.map(\.action.rawValue)
        let logger = logger
        do {
            let link = link
            try await withDeadline(serverDeadline, "storing the delete rules of \(referringType)") {
                // Through the link, so that a relay's request runs as its user.
                try await link.withConnection { connection in
                    _ = try await connection.query(
                    """
                    WITH gone AS (
                        DELETE FROM magicmirror.delete_rules
                        WHERE scope = \(key.scope) AND owner = \(key.owner) AND referring_type = \(referringType)
                          AND NOT (field = ANY(\(fields)::text[])))
                    INSERT INTO magicmirror.delete_rules
                        (scope, owner, referring_type, field, cardinality, target_type, action)
                    SELECT \(key.scope), \(key.owner), \(referringType), r.field, r.cardinality, r.target_type, r.action
                    FROM unnest(\(fields)::text[], \(cardinalities)::text[], \(targets)::text[], \(actions)::text[])
                        AS r(field, cardinality, target_type, action)
                    ON CONFLICT (scope, owner, referring_type, field) DO UPDATE SET
                        cardinality = EXCLUDED.cardinality, target_type = EXCLUDED.target_type,
                        action = EXCLUDED.action
                    WHERE (delete_rules.cardinality, delete_rules.target_type, delete_rules.action)
                        IS DISTINCT FROM (EXCLUDED.cardinality, EXCLUDED.target_type, EXCLUDED.action)
                    """, logger: logger)
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "storing the delete rules of \(referringType)", zone: zone)
        }
    }
}
