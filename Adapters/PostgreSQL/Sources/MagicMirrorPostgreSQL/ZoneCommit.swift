import Logging
import MagicMirror
import PostgresNIO

/// One commit of ``PostgreSQLDatabase``: one statement, one round trip to the server, that
/// queues behind the other commits of its zone instead of starting again when one landed
/// first.
///
/// The statement calls `magicmirror.commit_records` (see CommitSchema.swift), which takes the
/// zone's commit lock and row (making the row for a zone never written), reads the stored
/// records of the batch,
/// decides every operation as ``CommitPlan`` does, and writes them as one change (its
/// sequence number, the zone's `last_seq`, the asset holds it releases, the `NOTIFY`) or
/// nothing. It answers the zone's row as it was and the stored records the outcome needs;
/// the outcome is made here with ``CommitPlan`` from those records, so it is the one the
/// server applied.
///
/// A commit that deletes a record of a type a delete rule targets is answered `rules`
/// before anything is written, and becomes a ``LinkedCommit`` (one transaction with every
/// change the rules make).
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

    let operations: [RecordOperation]
    let zone: ZoneID
    let key: ZoneKey
    let writer: String

    func run(on connection: PostgresConnection, logger: Logger) async throws -> Result {
        let answer = try await CommitRows.commit(operations, to: key, writer: writer, on: connection, logger: logger)
        if case .rules = answer.status { return try await LinkedCommit(commit: self).run(on: connection, logger: logger) }
        return try result(of: answer)
    }

    /// Runs the commit as one call of `function` (see ``PostgreSQLActingUser/CommitFunction``),
    /// outside any transaction; `nil` when delete rules apply, so that it must be made again
    /// as a linked commit in a transaction (nothing was written).
    func run(
        through function: PostgreSQLActingUser.CommitFunction, on connection: PostgresConnection, logger: Logger
    ) async throws -> Result? {
        let answer = try await CommitRows.commit(
            operations, to: key, writer: writer, through: function, on: connection, logger: logger)
        if case .rules = answer.status { return nil }
        return try result(of: answer)
    }

    /// The outcome of the server's answer (which is not `rules`).
    private func result(of answer: CommitRows.Answer) throws -> Result {
        let previous = answer.zone.token
        switch answer.status {
        case .rules:
            break
        case .invalid(let id, let value):
            throw invalidAssetReference(id: id, value: value)
        case .missing(let ids, let digests):
            throw missingAssets(ids: ids, digests: digests)
        case .refused, .applied:
            break
        }
        let stored = answer.stored
        let plan = CommitPlan(operations, writer: writer) { id in stored[RecordKey(id)] }
        switch (plan, answer.status) {
        case (.refuse(let results), .refused):
            return Result(outcome: CommitOutcome(results: results, token: previous), previous: previous, changed: [])
        case (.apply(let produced), .applied(let sequence)):
            let changed = produced.compactMap { $0 }
            guard changed.isEmpty == (sequence == nil) else { break }
            let token = sequence.map { ChangeToken(generation: answer.zone.generation, sequence: $0) } ?? previous
            var results: [CommitOutcome.Result] = []
            results.reserveCapacity(operations.count)
            for (index, record) in produced.enumerated() {
                // A retry (`nil`) returns the record it already stored (the server sent it whole).
                if let record = record ?? stored[RecordKey(operations[index].recordID)] {
                    results.append(.applied(record))
                }
            }
            return Result(outcome: CommitOutcome(results: results, token: token), previous: previous, changed: changed)
        default:
            break
        }
        // The server and CommitPlan decide from the same records by the same rules.
        throw MirrorError(
            .corruptEntry,
            "committing to \(zone): the server's commit and this package's plan of it differ (is the schema's "
                + "magicmirror.commit_records another version's?)",
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
}
