import Logging
import MagicMirror
import PostgresNIO

/// One commit of ``PostgreSQLDatabase``, in as few round trips to the server as its
/// guarantees allow: usually two statements, each its own transaction.
///
/// 1. Read the zone's row and the stored records of the batch, in one snapshot
///    (``RecordRows/zoneAndRecords(_:ids:on:logger:)``); plan the batch against them
///    (`CommitPlan`, the versions and retries every database checks).
/// 2. Write the planned records (``RecordRows/write(_:over:key:writer:on:logger:)``): one
///    statement that locks the zone's row and writes only if the zone's sequence is still
///    the one read in step 1, so no commit can slip in between the read and the write.
///    When one did, start again from step 1.
///
/// A zone never written has no row yet: the first commit creates it (one more statement)
/// before step 1.
///
/// A commit that deletes also asks, in step 1, whether a delete rule targets the zone's
/// record type; when one does, the commit is a ``LinkedCommit`` instead (one transaction
/// with every change the rules make).
struct ZoneCommit: Sendable {
    /// What a commit produced: its outcome, the zone's token before it, and the records it
    /// stored (to deliver to this process's subscribers).
    struct Result: Sendable {
        var outcome: CommitOutcome
        let previous: ChangeToken
        var changed: [StoredRecord]
        /// The changes of a linked commit, in the order they were written, the commit's own
        /// zone's included (see ``LinkedCommit``).
        var linked: [LinkedWrite] = []
    }

    /// One change a linked commit stored in a zone of its scope space.
    struct LinkedWrite: Sendable {
        let zone: ZoneID
        let previous: ChangeToken
        let token: ChangeToken
        let changed: [StoredRecord]
    }

    /// How many times a commit reads and plans again because other commits to its zone
    /// went first, before it gives up with a transient error (the mirror retries).
    static let maximumAttempts = 100

    let operations: [RecordOperation]
    let zone: ZoneID
    let key: ZoneKey
    let writer: String
    let baseGeneration: Int

    func run(on connection: PostgresConnection, logger: Logger) async throws -> Result {
        let ids = operations.map(\.recordID)
        // Only a delete can set off a delete rule: other commits do not ask the server.
        let deletes = operations.contains { $0.action == .delete }
        var createdZone = false
        for _ in 0..<Self.maximumAttempts {
            guard let (row, stored, rulesApply) = try await RecordRows.zoneAndRecords(
                key, ids: ids, checkingRules: deletes, on: connection, logger: logger)
            else {
                // No row: a zone never written (create it, once), or one the role may not see.
                guard !createdZone else { throw denied() }
                try await ZoneRow.create(key, generation: baseGeneration, on: connection, logger: logger)
                createdZone = true
                continue
            }
            if rulesApply {
                return try await LinkedCommit(commit: self).run(on: connection, logger: logger)
            }
            switch CommitPlan(operations, writer: writer, stored: { stored[RecordKey($0)] }) {
            case .refuse(let results):
                return Result(outcome: CommitOutcome(results: results, token: row.token), previous: row.token, changed: [])
            case .apply(let produced):
                let changed = produced.compactMap { $0 }
                var token = row.token
                if !changed.isEmpty {
                    switch try await RecordRows.write(
                        changed, over: row, key: key, writer: writer, on: connection, logger: logger)
                    {
                    case .written(let sequence):
                        token = ChangeToken(generation: row.generation, sequence: sequence)
                    case .moved:
                        continue // another commit, or a collection, went first: read again
                    case .invalidReference(let id, let value):
                        throw invalidAssetReference(id: id, value: value)
                    case .missingAssets(let ids, let digests):
                        throw missingAssets(ids: ids, digests: digests)
                    }
                }
                var results: [CommitOutcome.Result] = []
                for (index, record) in produced.enumerated() {
                    // A retry (`nil`) returns the record it already stored.
                    if let record = record ?? stored[RecordKey(operations[index].recordID)] {
                        results.append(.applied(record))
                    }
                }
                return Result(outcome: CommitOutcome(results: results, token: token), previous: row.token, changed: changed)
            }
        }
        throw MirrorError(
            .unavailable,
            "committing to \(zone): other commits to the zone went first \(Self.maximumAttempts) times in a row",
            recordType: zone.recordType, scope: zone.scope)
    }

    /// The refusal of a record that refers to an asset with `value`, which is no digest.
    func invalidAssetReference(id: String, value: String) -> MirrorError {
        var error = MirrorError(
            .invalidRecord,
            "record \(id) refers to the asset \(value), which is not an asset digest (64 "
                + "lowercase hexadecimal digits); the key \"$asset\" is reserved for assets. "
                + "Nothing was stored.",
            recordIDs: [id], recordType: zone.recordType, scope: zone.scope)
        error.nothingStored = true
        return error
    }

    /// The refusal of records `ids` that refer to the assets `digests`, which the zone does
    /// not hold.
    func missingAssets(ids: [String], digests: [String]) -> MirrorError {
        var error = MirrorError(
            .notFound,
            "the asset \(digests.sorted().joined(separator: ", ")) is not stored in \(zone); the "
                + "records that refer to it were not committed. Store the asset in this zone first.",
            recordIDs: ids.sorted(), recordType: zone.recordType, scope: zone.scope)
        error.nothingStored = true
        return error
    }

    private func denied() -> MirrorError {
        MirrorError(.permissionDenied, "role cannot write zone \(zone)", recordType: zone.recordType, scope: zone.scope)
    }
}
