import Foundation
import Synchronization

// Pushing the replica's waiting local changes to the remote.

extension ReplicatedDatabase {
    /// Pushes the waiting local changes of `zone`, oldest first, in batches; settles
    /// conflicts; holds what the remote refuses for good.
    func push(_ zone: ZoneID) async throws(MirrorError) {
        var oneAtATime = false
        while true {
            let candidates = replication.withLock {
                $0.pushCandidates(in: zone, limit: oneAtATime ? 1 : Self.pushBatchSize)
            }
            guard !candidates.isEmpty else { return }
            let stored = try await replicaRecords(candidates, in: zone)
            var operations: [RecordOperation] = []
            var envelopes: [String: ReplicaEnvelope] = [:]
            var gone: [(String, HLCTimestamp?)] = []
            for id in candidates {
                guard let record = stored[id], let envelope = envelope(of: record), let operation = envelope.push(id)
                else {
                    gone.append((id, nil))
                    continue
                }
                envelopes[id] = envelope
                operations.append(operation)
            }
            noteWaiting(gone, in: zone)
            guard !operations.isEmpty else { continue }

            let outcome: CommitOutcome
            do {
                outcome = try await remote.commit(operations, to: zone)
            } catch {
                let failure = MirrorError.wrapping(error, "pushing local changes to the remote")
                    .adding(recordType: zone.recordType, scope: zone.scope)
                if failure.kind.isTransient || failure.kind == .cancelled { throw failure }
                // Refused for good: find the change to blame by pushing one at a time.
                if operations.count > 1 {
                    oneAtATime = true
                    continue
                }
                hold(operations[0], in: zone, failure, unsettled: false)
                continue
            }

            var updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?] = [:]
            let now = HybridLogicalClock.shared.now()
            let writer = writerID
            for (operation, result) in zip(operations, outcome.results) {
                let id = operation.recordID
                let pushedAt = operation.timestamp
                switch result {
                case .applied(let record):
                    updates[id] = { $0?.accepting(record, pushedAt: pushedAt) }
                case .conflict(let current):
                    if let current, current.modified == pushedAt, current.fields == operation.savedFields {
                        // Stored by an earlier push (this or another process): not again.
                        updates[id] = { $0?.accepting(current, pushedAt: pushedAt) }
                        continue
                    }
                    if let current { HybridLogicalClock.shared.observe(current.modified) }
                    let envelope = envelopes[id] ?? ReplicaEnvelope()
                    let conflict = PushConflict(
                        zone: zone, recordID: id, base: envelope.remote, localFields: envelope.local?.fields,
                        localTimestamp: pushedAt, current: current)
                    guard let resolution = settle(conflict) else {
                        hold(operation, in: zone, MirrorError(
                            .conflict,
                            "record \(id) changed on the remote since it was changed here, and no Mirror of "
                                + "record type \(zone.recordType) is open in this process to settle the conflict "
                                + "with its policy; the local change waits in the replica until one opens",
                            recordIDs: [id], recordType: zone.recordType, scope: zone.scope), unsettled: true)
                        continue
                    }
                    if case .hold(let error) = resolution {
                        hold(operation, in: zone, error, unsettled: false)
                        continue
                    }
                    updates[id] = {
                        $0?.settling(resolution, current: current, pushedAt: pushedAt, writer: writer, now: now)
                    }
                case .notApplied:
                    break   // pushed again in the next batch
                }
            }
            try await updateReplica(zone, updates)
        }
    }

    /// Holds a local change and reports it once.
    func hold(_ operation: RecordOperation, in zone: ZoneID, _ error: MirrorError, unsettled: Bool) {
        let error = error.adding(recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
        replication.withLock { state in
            state.zones[zone]?.held[operation.recordID] = ReplicationState.Held(
                timestamp: operation.timestamp, error: error, unsettled: unsettled)
        }
        report(error, key: "held|\(zone)|\(operation.recordID)|\(operation.timestamp)|\(unsettled)")
        publishStatus()
    }

    // MARK: Conflict settlers

    /// Lets a mirror of `recordType` settle the conflicts of pushed changes; `settle` returns
    /// `nil` once its mirror is gone, which removes it.
    func addConflictSettler(
        recordType: String, _ settle: @escaping @Sendable (PushConflict) -> PushResolution?
    ) {
        settlers.withLock { settlers in
            settlers.byType[recordType, default: [:]][settlers.next] = settle
            settlers.next += 1
        }
        // Conflicts held for want of a settler can be settled now.
        replication.withLock { $0.releaseUnsettled(recordType: recordType) }
        wakeup.signal()
    }

    /// Settles a conflict with the policy of an open mirror of its type; `nil` when none is.
    func settle(_ conflict: PushConflict) -> PushResolution? {
        let candidates = settlers.withLock { Array(($0.byType[conflict.zone.recordType] ?? [:]).sorted { $0.key < $1.key }) }
        for (key, settle) in candidates {
            if let resolution = settle(conflict) { return resolution }
            settlers.withLock { _ = $0.byType[conflict.zone.recordType]?.removeValue(forKey: key) }
        }
        return nil
    }
}

extension RecordOperation {
    /// The fields a save stores; `nil` for a deletion.
    var savedFields: Data? {
        if case .save(let fields) = action { return fields }
        return nil
    }
}
