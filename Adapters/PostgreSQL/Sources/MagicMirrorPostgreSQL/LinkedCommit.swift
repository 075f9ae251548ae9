import Foundation
import Logging
@_spi(DatabaseImplementation) import MagicMirror
import PostgresNIO

/// A commit that deletes records of a type that delete rules target, in one transaction
/// with every change the rules make (see the article "Running on PostgreSQL").
///
/// ``ZoneCommit`` hands a commit over when `magicmirror.commit_records` answered that a
/// rule targets the zone's record type and the commit deletes (having written nothing).
/// Then, in one transaction:
///
/// 1. read the scope space's rules, and take the commit locks, then the rows, of the zones
///    they can reach (`RelationshipEnforcement.reachableTypes`), in the order of their
///    numbers so that two linked commits, or a linked commit and a commit (which takes its
///    zone's commit lock before its row), cannot deadlock. Every commit to a zone locks its row before it writes,
///    so from here on no other writer can add a reference to a deleted record, or change or
///    remove one, until this transaction ends; each later statement reads everything
///    committed before the locks were granted;
/// 2. read the commit's own records and plan them (``CommitPlan``);
/// 3. find the live records that refer to a record the commit deletes, with a query on
///    their fields as JSON in the referring zones (``RelationshipRows/referrers(_:on:logger:)``,
///    locked `FOR UPDATE`), and again for the records a cascade may delete, until none is new;
/// 4. let MagicMirror's planning (`RelationshipEnforcement.writes`) decide: refuse the commit
///    for a deny rule (the transaction is rolled back), or write every zone's commits (in
///    the commit's zone, its own records, then the rules' changes to it), each with its own
///    sequence number and `NOTIFY`, sent when the transaction commits.
///
/// A client that dies before the end leaves nothing: the server rolls the transaction back.
struct LinkedCommit: Sendable {
    let commit: ZoneCommit

    func run(on connection: PostgresConnection, logger: Logger) async throws -> ZoneCommit.Result {
        try await connection.transactionUnlessActing(logger: logger) {
            try await plannedAndWritten(on: connection, logger: logger)
        }
    }

    private func plannedAndWritten(on connection: PostgresConnection, logger: Logger) async throws -> ZoneCommit.Result {
        let zone = commit.zone
        let rules = try await RelationshipRows.rules(of: commit.key, on: connection, logger: logger)
        let types = RelationshipEnforcement.reachableTypes(from: zone.recordType, rules: rules)
        let locked = try await RelationshipRows.lockZones(of: commit.key, types: types, on: connection, logger: logger)
        let ids = commit.operations.map(\.recordID)
        guard let (row, stored) = try await RecordRows.zoneAndRecords(
            commit.key, ids: ids, on: connection, logger: logger)
        else {
            throw MirrorError(
                .permissionDenied, "role cannot write zone \(zone)", recordType: zone.recordType, scope: zone.scope)
        }
        let produced: [StoredRecord]
        switch CommitPlan(commit.operations, writer: commit.writer, stored: { stored[RecordKey($0)] }) {
        case .refuse(let results):
            return ZoneCommit.Result(
                outcome: CommitOutcome(results: results, token: row.token), previous: row.token, changed: [])
        case .apply(let planned):
            produced = planned.compactMap { $0 }
        }

        let live = try await referrers(of: produced, rules: rules, zones: locked, on: connection, logger: logger)
        let writes = try RelationshipEnforcement.writes(
            for: produced, in: zone, rules: rules, writer: commit.writer,
            live: { type in live[type].map { Array($0.values) } ?? [] },
            stored: { writtenZone, id in
                let key = RecordKey(id)
                if writtenZone == zone, let record = stored[key] { return record }
                return live[writtenZone.recordType]?[key]
            })

        // Each zone's commits in order, each with its own sequence number and NOTIFY.
        var result = ZoneCommit.Result(
            outcome: CommitOutcome(results: [], token: row.token), previous: row.token, changed: [])
        var final: [RecordKey: StoredRecord] = [:]
        for write in writes {
            guard var zoneRow = write.zone == zone ? row : locked[write.zone.recordType] else {
                continue // a zone with no row has no referrer to change
            }
            for records in write.commits {
                let sequence = try await written(records, in: write.zone, over: zoneRow, on: connection, logger: logger)
                let previous = zoneRow.token
                zoneRow = zoneRow.moved(to: sequence)
                result.linked.append(.init(zone: write.zone, previous: previous, token: zoneRow.token, changed: records))
                if write.zone == zone {
                    for record in records { final[RecordKey(record.id)] = record }
                    result.outcome = CommitOutcome(results: [], token: zoneRow.token)
                }
            }
        }
        let results = ids.compactMap { id in (final[RecordKey(id)] ?? stored[RecordKey(id)]).map(CommitOutcome.Result.applied) }
        result.outcome = CommitOutcome(results: results, token: result.outcome.token)
        return result
    }

    /// Writes one commit of the linked commit to `zone`; its sequence number.
    private func written(
        _ records: [StoredRecord], in zone: ZoneID, over row: ZoneRow, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> Int {
        switch try await RecordRows.write(
            records, over: row, key: ZoneKey(zone), writer: commit.writer, on: connection, logger: logger)
        {
        case .written(let sequence):
            return sequence
        case .moved:
            // Cannot happen while this transaction holds the zone's row; a retry starts over.
            throw MirrorError(
                .unavailable, "committing to \(zone): the zone changed under its lock",
                recordType: zone.recordType, scope: zone.scope)
        case .invalidReference(let id, let value):
            throw commit.invalidAssetReference(id: id, value: value)
        case .missingAssets(let ids, let digests):
            throw commit.missingAssets(ids: ids, digests: digests)
        }
    }

    /// The live records of the referring zones that may refer to a record `produced`
    /// deletes, or to one a cascade may delete (a superset: the planning ignores what is
    /// not a reference), by record type and id.
    private func referrers(
        of produced: [StoredRecord], rules: [StoredDeleteRule], zones: [String: ZoneRow],
        on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: [RecordKey: StoredRecord]] {
        let cascading = Set(rules.filter { $0.action == .cascade }.map(\.referringType))
        var typeOfZone: [Int: String] = [:]
        for (type, row) in zones { typeOfZone[row.zoneID] = type }
        var live: [String: [RecordKey: StoredRecord]] = [:]
        // The commit's own records, saved ones too: one of them may be deleted by a cascade
        // rule of a type that refers to its own type.
        var searched: Set<ReferenceKey> = []
        var frontier: [(type: String, id: String)] = []
        for record in produced where searched.insert(ReferenceKey(commit.zone.recordType, record.id)).inserted {
            frontier.append((commit.zone.recordType, record.id))
        }
        while !frontier.isEmpty {
            let targetTypes = Set(frontier.map(\.type))
            let searches = rules.compactMap { rule -> RelationshipRows.Search? in
                guard targetTypes.contains(rule.targetType), let row = zones[rule.referringType] else { return nil }
                return RelationshipRows.Search(zoneID: row.zoneID, field: rule.field, targetType: rule.targetType)
            }
            guard !searches.isEmpty else { break }
            let found = try await RelationshipRows.referrers(
                RelationshipRows.Query(searches: searches, targets: frontier), on: connection, logger: logger)
            frontier = []
            for (zoneID, record) in found {
                guard let type = typeOfZone[zoneID] else { continue }
                live[type, default: [:]][RecordKey(record.id)] = record
                if cascading.contains(type), searched.insert(ReferenceKey(type, record.id)).inserted {
                    frontier.append((type, record.id))
                }
            }
        }
        return live
    }
}

/// A record of a record type, by the bytes of both names.
private struct ReferenceKey: Hashable {
    let type: [UInt8]
    let id: [UInt8]
    init(_ type: String, _ id: String) {
        self.type = Array(type.utf8)
        self.id = Array(id.utf8)
    }
}
