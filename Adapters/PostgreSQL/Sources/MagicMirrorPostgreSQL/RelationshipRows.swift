import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// The statements of a ``LinkedCommit``, each one round trip: the rules of a scope space,
/// the zones they reach (locked), and the records that refer to deleted ones.
enum RelationshipRows {
    /// Every delete rule of the scope space of the zone `key` names (row-level security
    /// shows a role the public rules and its own private ones).
    static func rules(of key: ZoneKey, on connection: PostgresConnection, logger: Logger) async throws -> [StoredDeleteRule] {
        let rows = try await connection.query(
            """
            SELECT referring_type, field, cardinality, target_type, action FROM magicmirror.delete_rules
            WHERE scope = \(key.scope) AND owner = \(key.owner)
            ORDER BY referring_type, field
            """, logger: logger)
        var rules: [StoredDeleteRule] = []
        for try await (referringType, field, cardinality, targetType, action) in rows.decode(
            (String, String, String, String, String).self
        ) {
            // The table's checks allow only these values.
            guard let cardinality = StoredDeleteRule.Cardinality(rawValue: cardinality),
                  let action = StoredDeleteRule.Action(rawValue: action)
            else { continue }
            rules.append(StoredDeleteRule(
                referringType: referringType, field: field, cardinality: cardinality, targetType: targetType,
                action: action))
        }
        return rules
    }

    /// The rows of the zones of `types` in the scope space of `key` that exist, locked until
    /// the transaction ends, in the order of their numbers (every linked commit takes them
    /// in that order, so two cannot wait for each other), each after its commit lock; by
    /// record type.
    static func lockZones(
        of key: ZoneKey, types: [String], on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: ZoneRow] {
        // First their commit locks, in the same order: a commit (`commit_records`) takes its
        // zone's commit lock before its row, so this transaction must too.
        try await connection.query(
            """
            SELECT pg_advisory_xact_lock(\(unescaped: String(ProtectionSchema.commitLockClass)), hashtext(z.notify_key))::text
            FROM (SELECT zone_id, notify_key FROM magicmirror.zones
                  WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = ANY(\(types)::text[])
                  ORDER BY zone_id) z
            """, logger: logger)
        let rows = try await connection.query(
            """
            SELECT record_type, zone_id, generation, base_seq, last_seq, assets_epoch FROM magicmirror.zones
            WHERE scope = \(key.scope) AND owner = \(key.owner) AND record_type = ANY(\(types)::text[])
            ORDER BY zone_id
            FOR UPDATE
            """, logger: logger)
        var zones: [String: ZoneRow] = [:]
        for try await (type, zoneID, generation, base, last, epoch) in rows.decode(
            (String, Int, Int, Int, Int, Int).self
        ) {
            zones[type] = ZoneRow(
                zoneID: zoneID, generation: generation, baseSequence: base, lastSequence: last, assetsEpoch: epoch)
        }
        return zones
    }

    /// One rule to follow: the referring zone, its field and the rule's target type.
    struct Search: Sendable {
        let zoneID: Int
        let field: String
        let targetType: String
    }

    /// The rules to follow and the records (by type and id) whose referrers to find.
    struct Query: Sendable {
        let searches: [Search]
        let targets: [(type: String, id: String)]
    }

    /// The live records of the searches' zones whose field refers to one of the targets —
    /// a to-one reference `{"recordType":…,"recordID":…}`, or an array that holds one —
    /// and those whose fields are not JSON the server can read (MagicMirror's planning
    /// decides about them), locked `FOR UPDATE`; with their zone's number.
    ///
    /// The server reads each live record of the searched zones as JSON
    /// (`magicmirror.fields_jsonb`): the cost of a delete that rules follow grows with the
    /// size of the referring zones.
    static func referrers(
        _ query: Query, on connection: PostgresConnection, logger: Logger
    ) async throws -> [(zoneID: Int, record: StoredRecord)] {
        let rows = try await connection.query(
            """
            WITH rule_search AS (
                SELECT * FROM unnest(\(query.searches.map { $0.zoneID })::int8[], \(query.searches.map { $0.field })::text[],
                                     \(query.searches.map { $0.targetType })::text[]) AS s(zone_id, field, target_type)),
            target AS (
                SELECT * FROM unnest(\(query.targets.map { $0.type })::text[], \(query.targets.map { $0.id })::text[])
                    AS t(type, id)),
            parsed AS MATERIALIZED (
                SELECT r.zone_id, r.id, s.field, s.target_type, magicmirror.fields_jsonb(r.fields) AS fields
                FROM rule_search s JOIN magicmirror.records r ON r.zone_id = s.zone_id AND r.fields IS NOT NULL),
            candidate AS (
                SELECT zone_id, id, target_type, fields -> field AS value, fields IS NULL AS unreadable FROM parsed),
            referred AS (
                SELECT c.zone_id, c.id, c.target_type, e ->> 'recordID' AS target_id
                FROM candidate c,
                     jsonb_array_elements(CASE jsonb_typeof(c.value) WHEN 'array' THEN c.value
                                          ELSE jsonb_build_array(c.value) END) AS e
                WHERE e ->> 'recordType' = c.target_type),
            hit AS (
                SELECT referred.zone_id, referred.id FROM referred
                JOIN target ON target.type = referred.target_type AND target.id = referred.target_id
                UNION
                SELECT zone_id, id FROM candidate WHERE unreadable)
            SELECT r.zone_id, \(unescaped: RecordRows.columns)
            FROM magicmirror.records r
            WHERE (r.zone_id, r.id) IN (SELECT zone_id, id FROM hit) AND r.fields IS NOT NULL
            FOR UPDATE OF r
            """, logger: logger)
        var found: [(zoneID: Int, record: StoredRecord)] = []
        for try await (zoneID, id, version, fields, millis, counter, writer, createdMillis, createdCounter) in rows.decode(
            (Int, String?, Int?, Data?, Int?, Int?, String?, Int?, Int?).self
        ) {
            if let record = RecordRows.record((id, version, fields, millis, counter, writer, createdMillis, createdCounter)) {
                found.append((zoneID, record))
            }
        }
        return found
    }
}
