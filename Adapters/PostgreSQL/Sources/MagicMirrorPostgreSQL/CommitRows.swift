import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// The statement of a ``ZoneCommit``: one call of `magicmirror.commit_records` (see
/// CommitSchema.swift), and what it answered.
enum CommitRows {
    /// What the server did with a commit.
    enum Status: Sendable {
        /// Stored as the change with this sequence number; `nil` when every operation was a
        /// retry of a change already stored (nothing written).
        case applied(Int?)
        /// An operation's base version is not the stored version: nothing stored.
        case refused
        /// The commit deletes a record of a type a delete rule targets: nothing stored, the
        /// client makes it a ``LinkedCommit``.
        case rules
        /// Nothing stored: record `id` refers to an asset with `value`, which is no digest.
        case invalid(id: String, value: String)
        /// Nothing stored: the records `ids` refer to the assets `digests`, which the zone
        /// does not hold.
        case missing(ids: [String], digests: [String])
    }

    /// The server's answer: the zone's row before the commit, what it did, and the stored
    /// records of the batch as they were (with their fields for a retry or a conflict, an
    /// empty placeholder for the others, which the plan reads no further than their version,
    /// clock, writer and deletion).
    struct Answer: Sendable {
        let zone: ZoneRow
        let status: Status
        let stored: [RecordKey: StoredRecord]
    }

    /// Commits `operations` (validated: at most one per record) to the zone `key` names, as
    /// `writer`, in one statement: `commit_records`, or `function`, which calls it.
    static func commit(
        _ operations: [RecordOperation], to key: ZoneKey, writer: String,
        through function: PostgreSQLActingUser.CommitFunction? = nil, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> Answer {
        var ids: [String] = [], bases: [Int] = [], fields: [ByteBuffer] = [], deleted: [Bool] = []
        var millis: [Int] = [], counters: [Int] = []
        ids.reserveCapacity(operations.count)
        bases.reserveCapacity(operations.count)
        fields.reserveCapacity(operations.count)
        deleted.reserveCapacity(operations.count)
        millis.reserveCapacity(operations.count)
        counters.reserveCapacity(operations.count)
        for operation in operations {
            ids.append(operation.recordID)
            bases.append(operation.baseVersion)
            switch operation.action {
            case .save(let data):
                fields.append(ByteBuffer(bytes: data))
                deleted.append(false)
            case .delete:
                fields.append(ByteBuffer())
                deleted.append(true)
            }
            millis.append(Int(operation.timestamp.millis))
            counters.append(Int(operation.timestamp.counter))
        }
        let statement = Statement(
            scope: key.scope, owner: key.owner, recordType: key.recordType, writer: writer, ids: ids, bases: bases,
            fields: fields, deleted: deleted, millis: millis, counters: counters)
        if let function {
            let rows = try await connection.query(statement.call(function), logger: logger).decode(Statement.Row.self)
            return try await answer(rows, operations, noted: function.noted)
        }
        return try await answer(try await connection.execute(statement, logger: logger), operations, noted: { _ in })
    }

    /// The answer `rows` make.
    private static func answer(
        _ rows: some AsyncSequence<Statement.Row, any Error>, _ operations: [RecordOperation],
        noted: (String) -> Void
    ) async throws -> Answer {
        var zone: ZoneRow?
        var outcome: String?
        var sequence: Int?
        var stored: [RecordKey: StoredRecord] = [:]
        var problems: [(id: String, value: String)] = []
        for try await (kind, status, generation, base, last, drawn, index, version, recordFields, isDeleted,
                       modifiedMillis, modifiedCounter, recordWriter, createdMillis, createdCounter, id, value) in rows
        {
            switch kind {
            case "zone":
                guard let generation, let base, let last else { continue }
                zone = ZoneRow(zoneID: 0, generation: generation, baseSequence: base, lastSequence: last, assetsEpoch: 0)
                outcome = status
                sequence = drawn
            case "stored":
                guard let index, operations.indices.contains(index - 1), let version, let isDeleted,
                      let modifiedMillis, let modifiedCounter, let recordWriter, let createdMillis, let createdCounter
                else { continue }
                let id = operations[index - 1].recordID
                stored[RecordKey(id)] = StoredRecord(
                    id: id, version: version, fields: isDeleted ? nil : (recordFields ?? Data()),
                    modified: HLCTimestamp(millis: Int64(modifiedMillis), counter: UInt32(clamping: modifiedCounter)),
                    writer: recordWriter,
                    created: HLCTimestamp(millis: Int64(createdMillis), counter: UInt32(clamping: createdCounter)))
            default:
                if let id, let value { problems.append((id, value)) } else { noted(kind) }
            }
        }
        var status: Status?
        switch outcome {
        case "applied": status = .applied(sequence)
        case "refused": status = .refused
        case "rules": status = .rules
        case "invalid": status = problems.first.map { .invalid(id: $0.id, value: $0.value) }
        case "missing":
            var seen = Set<RecordKey>()
            status = .missing(
                ids: problems.map(\.id).filter { seen.insert(RecordKey($0)).inserted },
                digests: Array(Set(problems.map(\.value))))
        default: status = nil
        }
        guard let zone, let status else {
            throw MirrorError(
                .corruptEntry, "magicmirror.commit_records answered no outcome (is the schema another version's?)")
        }
        return Answer(zone: zone, status: status, stored: stored)
    }

    /// The call, prepared once per connection (the server parses and plans it once).
    struct Statement: PostgresPreparedStatement {
        static let name = "magicmirror_commit_records_v7"
        static let sql = CommitSchema.call("magicmirror.commit_records")
        typealias Row = (
            String, String?, Int?, Int?, Int?, Int?, Int?, Int?, Data?, Bool?, Int?, Int?, String?, Int?, Int?, String?,
            String?)

        let scope: String, owner: String, recordType: String, writer: String
        let ids: [String], bases: [Int], fields: [ByteBuffer], deleted: [Bool], millis: [Int], counters: [Int]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 10)
            appendArguments(to: &bindings)
            return bindings
        }

        /// `commit_records`' ten arguments, in order.
        private func appendArguments(to bindings: inout PostgresBindings) {
            bindings.append(scope)
            bindings.append(owner)
            bindings.append(recordType)
            bindings.append(writer)
            bindings.append(ids)
            bindings.append(bases)
            bindings.append(fields)
            bindings.append(deleted)
            bindings.append(millis)
            bindings.append(counters)
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }

        /// The statement as a call of `function`: its arguments first, then these ten.
        func call(_ function: PostgreSQLActingUser.CommitFunction) -> PostgresQuery {
            var bindings = PostgresBindings(capacity: function.arguments.count + 10)
            for argument in function.arguments {
                if let argument { bindings.append(argument) } else { bindings.appendNull() }
            }
            appendArguments(to: &bindings)
            return PostgresQuery(
                unsafeSQL: CommitSchema.call(function.name, leading: function.arguments.count), binds: bindings)
        }
    }
}
