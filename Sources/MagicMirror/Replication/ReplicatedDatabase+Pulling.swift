import Foundation
import Synchronization

// Pulling the remote's changes into the replica, and writing the replica.

extension ReplicatedDatabase {
    /// Pulls the remote's changes since the replica's token into the replica, or the whole
    /// zone when the replica has none (new, deleted, another remote's) or its files had
    /// unreadable entries. Records with a local change waiting are left to the push, which
    /// meets the remote's change as a conflict.
    func pull(_ zone: ZoneID) async throws(MirrorError) {
        let stateRecord = try await replicaRecords([Self.stateRecordID], in: zone)[Self.stateRecordID]
        let saved = stateRecord?.fields.flatMap { try? JSONDecoder().decode(ReplicaSyncState.self, from: $0) }
        let corruption = corruptEntries(in: zone)
        let rebuild = replication.withLock { corruption > ($0.zones[zone]?.corruptionSeen ?? 0) }
        let set: ChangeSet
        do {
            if let saved, saved.remote == remote.identifier, !rebuild {
                set = try await remote.changes(in: zone, since: saved.token)
            } else {
                set = try await remote.fetchAll(in: zone)
            }
        } catch {
            throw MirrorError.wrapping(error, "reading the remote's changes")
        }
        if let saved, !rebuild, !set.isComplete, set.records.isEmpty, set.token == saved.token { return }

        var updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?] = [:]
        let isComplete = set.isComplete
        for record in set.records where record.id != Self.stateRecordID {
            updates[record.id] = { envelope in
                guard envelope?.local == nil else { return nil }
                guard let envelope else { return record.isDeleted ? nil : ReplicaEnvelope().applyingRemote(record, id: record.id) }
                if let known = envelope.remote, known == record || (!isComplete && known.version > record.version) {
                    return nil
                }
                return envelope.applyingRemote(record, id: record.id)
            }
        }
        if isComplete {
            let listed = Set(set.records.map(\.id))
            let all: ChangeSet
            do { all = try await local.fetchAll(in: zone) } catch { throw MirrorError.wrapping(error, "reading the replica") }
            for record in all.records where record.id != Self.stateRecordID && !listed.contains(record.id) {
                updates[record.id] = { envelope in
                    guard let envelope, envelope.local == nil, envelope.remote != nil else { return nil }
                    return envelope.applyingRemote(nil, id: record.id)
                }
            }
        }
        let newState = ReplicaSyncState(remote: remote.identifier, token: set.token)
        try await updateReplica(zone, updates, syncState: newState)
        if rebuild {
            replication.withLock { $0.zones[zone]?.corruptionSeen = corruption }
            report(MirrorError(
                .corruptEntry,
                "the replica of zone \(zone) had entries that could not be read; its records were reloaded "
                    + "from the remote, and the local changes in the readable entries are kept",
                recordType: zone.recordType, scope: zone.scope, file: local.directory(of: zone).path),
                key: "rebuilt|\(zone)|\(corruption)")
        }
    }

    /// The number of entries of the zone's replica files the JSON-file database quarantined.
    func corruptEntries(in zone: ZoneID) -> Int {
        let directory = local.directory(of: zone).path + "/"
        return local.problems.reduce(0) { count, problem in
            count + (problem.kind == .corruptEntry && (problem.file?.hasPrefix(directory) ?? false) ? 1 : 0)
        }
    }

    // MARK: Writing the replica

    /// Applies `updates` (each returns the record's new envelope, or `nil` to leave it) and
    /// the new synchronisation state to the replica in one commit, reading and trying again
    /// when another writer changed the records meanwhile. Tells subscribers of the views that
    /// changed.
    func updateReplica(
        _ zone: ZoneID, _ updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?],
        syncState: ReplicaSyncState? = nil
    ) async throws(MirrorError) {
        guard !updates.isEmpty || syncState != nil else { return }
        var ids = Array(updates.keys)
        if syncState != nil { ids.append(Self.stateRecordID) }
        let stateFields = syncState.flatMap { try? JSONEncoder().encode($0) }
        for _ in 0..<Self.replicaAttempts {
            let stored = try await replicaRecords(ids, in: zone)
            var operations: [RecordOperation] = []
            var changed: [StoredRecord] = []
            var waiting: [(String, HLCTimestamp?)] = []
            for (id, update) in updates {
                let record = stored[id]
                let envelope = record.flatMap { self.envelope(of: $0) }
                guard let next = update(envelope), next != envelope else { continue }
                operations.append(.save(
                    id, fields: next.encoded(), baseVersion: record?.version ?? 0,
                    timestamp: HybridLogicalClock.shared.now()))
                if next.version != envelope?.version { changed.append(next.view(id)) }
                waiting.append((id, next.local?.timestamp))
            }
            if let stateFields, let syncState {
                let current = stored[Self.stateRecordID]
                let saved = current?.fields.flatMap { try? JSONDecoder().decode(ReplicaSyncState.self, from: $0) }
                if saved != syncState {
                    operations.append(.save(
                        Self.stateRecordID, fields: stateFields, baseVersion: current?.version ?? 0,
                        timestamp: HybridLogicalClock.shared.now()))
                }
            }
            guard !operations.isEmpty else { return }
            let outcome: CommitOutcome
            do {
                outcome = try await local.commit(operations, to: zone)
            } catch {
                throw MirrorError.wrapping(error, "writing the replica")
            }
            guard outcome.isApplied else { continue }
            noteWaiting(waiting, in: zone)
            notify(changed, in: zone, token: outcome.token, writer: nil)
            return
        }
        throw busyReplica(zone)
    }
}
