import Foundation
import MagicMirror

/// Requirements 3 and 4 of ``RecordDatabase`` applied to the records a commit names, as
/// they are stored at the start of its transaction.
enum CommitRules {
    /// What a commit does.
    enum Plan {
        /// Every operation applies: the records to store, one per operation, `nil` for a
        /// retry of a change already stored (which stores nothing).
        case apply([StoredRecord?])
        /// At least one operation conflicts: nothing is stored; the results to return.
        case refuse([CommitOutcome.Result])
    }

    /// Decides what `operations` do against `stored`.
    static func plan(_ operations: [RecordOperation], stored: [RecordKey: StoredRecord], writer: String) -> Plan {
        var produced: [StoredRecord?] = []
        var conflicts: [CommitOutcome.Result?] = []
        var conflicted = false
        for operation in operations {
            let current = stored[RecordKey(operation.recordID)]
            if let current, current.writer == writer, current.modified == operation.timestamp {
                produced.append(nil)
                conflicts.append(nil)
                continue
            }
            let version = current?.version ?? 0
            guard version == operation.baseVersion else {
                conflicted = true
                produced.append(nil)
                conflicts.append(.conflict(current: current))
                continue
            }
            let fields: Data? = switch operation.action {
            case .save(let data): data
            case .delete: nil
            }
            produced.append(
                StoredRecord(
                    id: operation.recordID, version: version + 1, fields: fields,
                    modified: operation.timestamp, writer: writer,
                    // Kept from a live record; a save over nothing or a tombstone creates it.
                    created: current.flatMap { $0.isDeleted ? nil : $0.created } ?? operation.timestamp))
            conflicts.append(nil)
        }
        guard conflicted else { return .apply(produced) }
        return .refuse(conflicts.map { $0 ?? .notApplied })
    }
}
