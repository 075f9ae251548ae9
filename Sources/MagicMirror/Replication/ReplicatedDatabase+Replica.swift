import Foundation
import Synchronization

// Reading the local replica: its records, the envelopes they hold, the views mirrors see.

extension ReplicatedDatabase {
    /// How many times a commit or an update of the replica is tried again when another
    /// writer changed the replica between its read and its write.
    static let replicaAttempts = 16

    /// The replica's records with the given ids, by id.
    func replicaRecords(_ ids: [String], in zone: ZoneID) async throws(MirrorError) -> [String: StoredRecord] {
        let records: [StoredRecord]
        do {
            records = try await local.fetch(ids, in: zone)
        } catch {
            throw MirrorError.wrapping(error, "reading the replica")
        }
        var byID: [String: StoredRecord] = [:]
        for record in records { byID[record.id] = record }
        return byID
    }

    /// The envelope a replica record holds, or `nil` (reported once) when it holds none.
    func envelope(of record: StoredRecord) -> ReplicaEnvelope? {
        guard let fields = record.fields else { return nil }
        if let envelope = ReplicaEnvelope(decoding: fields, id: record.id) { return envelope }
        report(MirrorError(
            .corruptEntry,
            "replica record \(record.id) (version \(record.version)) is not a replica entry; it is left out",
            recordIDs: [record.id]), key: "envelope|\(record.id)|\(record.version)")
        return nil
    }

    /// The records mirrors see for replica records (the state record left out).
    func views(of records: [StoredRecord]) -> [StoredRecord] {
        records.compactMap { record in
            guard record.id != Self.stateRecordID, let envelope = envelope(of: record) else { return nil }
            return envelope.view(record.id)
        }
    }

    /// Tells this instance's subscribers that the views of `records` changed.
    func notify(_ records: [StoredRecord], in zone: ZoneID, token: ChangeToken, writer: String?) {
        guard !records.isEmpty else { return }
        subscribers.deliver(RemoteNotification.grouping(
            records, databaseIdentifier: identifier, zone: zone, token: token, writer: writer))
    }

    func busyReplica(_ zone: ZoneID) -> MirrorError {
        var failure = MirrorError(
            .ioFailure,
            "the replica of zone \(zone) kept changing while it was being updated; try again",
            recordType: zone.recordType, scope: zone.scope)
        failure.nothingStored = true
        return failure
    }
}
