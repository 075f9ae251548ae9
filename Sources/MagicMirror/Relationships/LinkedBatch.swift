import Foundation

/// What one linked commit writes to one zone (as the JSON-file intent records it): the records of the
/// commit's own operations (in the commit's zone) and the changes the delete rules make.
///
/// ``commits(stored:)`` turns it into the commits to append, based on what is stored now;
/// the same call serves the first attempt and the replay of an intent a crash left behind
/// (``isApplied(stored:)`` recognises a batch already appended: a zone's append is atomic).
package struct LinkedBatch: Sendable {
    package var zone: ZoneID
    /// The records the commit's own operations store (only in the commit's zone).
    package var produced: [StoredRecord]
    /// The changes the delete rules make in the zone.
    package var changes: [LinkedChange]
    /// The writer of the linked commit.
    package var writer: String
    /// The clock reading of the rules' changes.
    package var timestamp: HLCTimestamp

    package init(
        zone: ZoneID, produced: [StoredRecord], changes: [LinkedChange], writer: String, timestamp: HLCTimestamp
    ) {
        self.zone = zone
        self.produced = produced
        self.changes = changes
        self.writer = writer
        self.timestamp = timestamp
    }

    /// The batches of a commit to `zone` whose operations store `produced` and whose rules
    /// make `changes` (by record type): the commit's zone first, then the others by type.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for a record type that is not a valid name.
    package static func batches(
        of zone: ZoneID, produced: [StoredRecord], changes: [String: [LinkedChange]], writer: String,
        timestamp: HLCTimestamp
    ) throws(MirrorError) -> [LinkedBatch] {
        var batches = [LinkedBatch(
            zone: zone, produced: produced, changes: changes[zone.recordType] ?? [], writer: writer,
            timestamp: timestamp)]
        for (type, linked) in changes.sorted(by: { $0.key < $1.key }) where type != zone.recordType {
            batches.append(LinkedBatch(
                zone: try zone.sibling(type), produced: [], changes: linked, writer: writer, timestamp: timestamp))
        }
        return batches
    }

    /// Whether the batch is stored already: one of its records carries its writer and clock.
    package func isApplied(stored: (String) -> StoredRecord?) -> Bool {
        for record in produced {
            if let current = stored(record.id), current.writer == writer, current.modified == record.modified {
                return true
            }
        }
        for change in changes {
            if let current = stored(change.recordID), current.writer == writer, current.modified == timestamp {
                return true
            }
        }
        return false
    }

    /// The records to append, as the zone's next commits: the commit's own records, each
    /// one version above what is stored now (a delete of a record deleted meanwhile is
    /// dropped); then, as a commit of its own, the records the rules' changes produce on top.
    /// Empty commits are left out.
    ///
    /// The rules' changes are a commit of their own so that the mirror that made the commit,
    /// which learns from its outcome only what its own operations did, sees that its zone
    /// moved on by more and pulls the rest.
    package func commits(stored: (String) -> StoredRecord?) -> [[StoredRecord]] {
        var own: [StoredRecord] = []
        var ownByID = IDMap<StoredRecord>()
        for var record in produced {
            let current = stored(record.id)
            if record.isDeleted, let current, current.isDeleted { continue }
            record.version = (current?.version ?? 0) + 1
            record.created = ZoneState.created(after: current, at: record.modified)
            own.append(record)
            ownByID[record.id] = record
        }
        let linked = LinkedChange.records(
            applying: changes, stored: { ownByID[$0] ?? stored($0) }, writer: writer, timestamp: timestamp)
        return [own, linked].filter { !$0.isEmpty }
    }
}
