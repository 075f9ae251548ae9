import Foundation

/// A change that a delete rule makes to a record, in the same commit as the delete that
/// caused it: delete the record (cascade), or remove references from its fields (nullify).
///
/// It says what to do, not the record it produces, so that it can be applied again to
/// whatever is stored (the recovery of a commit a crash interrupted, see
/// `JSONFileRelationships`): ``records(applying:stored:writer:timestamp:)`` recognises
/// changes already applied.
package struct LinkedChange: Hashable, Sendable, Codable {
    /// References to remove from one field.
    package struct Nullification: Hashable, Sendable, Codable {
        package var field: String
        package var targetType: String
        package var targetIDs: [String]
    }

    /// The record changed.
    package var recordID: String
    /// Whether the record is deleted (then ``nullifications`` is empty).
    package var deletes: Bool
    /// The references to remove, when the record is kept.
    package var nullifications: [Nullification]

    package static func delete(_ recordID: String) -> LinkedChange {
        LinkedChange(recordID: recordID, deletes: true, nullifications: [])
    }

    /// The records that `changes` produce from the records stored now.
    ///
    /// A change whose record is missing or deleted, or leaves its fields as they are,
    /// produces nothing; so does one already applied (the stored record was written by
    /// `writer` at `timestamp`), which makes applying the same changes twice safe.
    ///
    /// - Parameters:
    ///   - changes: The changes, at most one per record.
    ///   - stored: The record stored under an id now (a tombstone for a deleted record).
    ///   - writer: The writer that makes the changes.
    ///   - timestamp: The clock reading the changes carry.
    package static func records(
        applying changes: [LinkedChange], stored: (String) -> StoredRecord?, writer: String,
        timestamp: HLCTimestamp
    ) -> [StoredRecord] {
        var produced: [StoredRecord] = []
        produced.reserveCapacity(changes.count)
        for change in changes {
            guard let current = stored(change.recordID), let fields = current.fields else { continue }
            if current.writer == writer, current.modified == timestamp { continue }
            let newFields: Data?
            if change.deletes {
                newFields = nil
            } else {
                var rewritten = fields
                for nullification in change.nullifications {
                    if let changed = ReferenceFields.removing(
                        IDSet(nullification.targetIDs), from: rewritten, field: nullification.field,
                        targetType: nullification.targetType)
                    {
                        rewritten = changed
                    }
                }
                if rewritten == fields { continue }
                newFields = rewritten
            }
            produced.append(StoredRecord(
                id: current.id, version: StoredRecord.version(after: current.version), fields: newFields, modified: timestamp,
                writer: writer, created: current.created))
        }
        return produced
    }
}
