import Foundation

/// What one commit does, by requirements 3 to 5 of ``RecordDatabase``: the records to store,
/// or the results of a commit refused because an operation conflicts.
///
/// Every database MagicMirror ships decides its commits with it, and so can yours: read the
/// records the operations name, as stored when the commit starts (tombstones included),
/// make the plan, then store ``apply(_:)``'s records atomically, or store nothing and return
/// ``refuse(_:)``'s results. For example, in a database that keeps a dictionary:
///
/// ```swift
/// switch CommitPlan(operations, writer: writerID, stored: { records[$0] }) {
/// case .apply(let produced):
///     for record in produced.compactMap({ $0 }) { records[record.id] = record }
/// case .refuse(let results):
///     return CommitOutcome(results: results, token: token)
/// }
/// ```
public enum CommitPlan: Hashable, Sendable {
    /// Every operation applies: the record each one stores, in the order of the operations
    /// (with its version, clock, writer and creation clock set), or `nil` for the retry of
    /// a change already stored (same writer and timestamp), which stores nothing.
    case apply([StoredRecord?])
    /// At least one operation's base version is not the stored version: nothing is
    /// stored. One result per operation: ``CommitOutcome/Result/conflict(current:)`` for
    /// those that conflict, ``CommitOutcome/Result/notApplied`` for the others.
    case refuse([CommitOutcome.Result])

    /// Decides what `operations` do to the records they name.
    ///
    /// - Parameters:
    ///   - operations: The commit's operations, at most one per record, already validated.
    ///   - writer: The committing database's ``RecordDatabase/writerID``.
    ///   - stored: The record stored under an id (a tombstone for a deleted record), or
    ///     `nil` for one never stored.
    public init(_ operations: [RecordOperation], writer: String, stored: (String) -> StoredRecord?) {
        var produced: [StoredRecord?] = []
        // Only the operations that conflict: most commits have none (a result for every
        // operation, in an array grown by doubling, was about 9 MB for 100,000 operations).
        var conflicts: [(index: Int, current: StoredRecord?)] = []
        produced.reserveCapacity(operations.count)
        for operation in operations {
            let current = stored(operation.recordID)
            switch Self.decide(operation, writer: writer, current: current) {
            case .retry:
                produced.append(nil)
            case .conflict:
                conflicts.append((produced.count, current))
                produced.append(nil)
            case .store(let record):
                produced.append(record)
            }
        }
        guard !conflicts.isEmpty else {
            self = .apply(produced)
            return
        }
        var results = [CommitOutcome.Result](repeating: .notApplied, count: operations.count)
        for (index, current) in conflicts { results[index] = .conflict(current: current) }
        self = .refuse(results)
    }

    /// What one operation does to the record stored under its id.
    package enum Decision {
        /// A retry of a change already stored (same writer and timestamp): nothing to store.
        case retry
        /// The base version is not the stored version.
        case conflict
        /// The record to store.
        case store(StoredRecord)
    }

    /// What `operation` does to `current`, the record stored under its id (`nil` for one
    /// never stored), committed by `writer`: the rule of each operation of a plan, which
    /// needs no other operation (so a large commit can decide its operations in parallel).
    package static func decide(_ operation: RecordOperation, writer: String, current: StoredRecord?) -> Decision {
        if let current, current.writer == writer, current.modified == operation.timestamp {
            return .retry
        }
        let version = current?.version ?? 0
        guard version == operation.baseVersion else { return .conflict }
        let fields: Data? = switch operation.action {
        case .save(let data): data
        case .delete: nil
        }
        return .store(
            StoredRecord(
                id: operation.recordID, version: StoredRecord.version(after: version), fields: fields,
                modified: operation.timestamp, writer: writer,
                created: ZoneState.created(after: current, at: operation.timestamp)))
    }
}
