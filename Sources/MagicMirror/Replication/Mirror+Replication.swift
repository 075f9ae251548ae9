import Foundation

// A mirror on a ReplicatedDatabase settles the conflicts of pushed offline changes of its
// record type with its own conflict policy, the same code that settles its own conflicts.

extension Mirror {
    /// When the database is a ``ReplicatedDatabase``, offers to settle the conflicts its
    /// pushes meet for this record type, for as long as the mirror lives.
    func offerConflictSettling() {
        guard let replicated = database as? ReplicatedDatabase else { return }
        replicated.addConflictSettler(recordType: Record.recordType) { [weak self] conflict in
            self?.settle(conflict)
        }
    }

    /// Settles a pushed change's conflict as ``resolve(_:policy:writerID:)`` settles the
    /// mirror's own: the remote record the change was made from is the base.
    func settle(_ conflict: PushConflict) -> PushResolution {
        let value: Record?
        if let fields = conflict.localFields {
            do {
                value = try schema.decode(fields)
            } catch {
                return .hold(MirrorError(
                    .decodingFailed,
                    "the local change of record \(conflict.recordID) does not decode as \(Record.self), so its "
                        + "conflict with the remote cannot be settled; it stays in the replica",
                    recordIDs: [conflict.recordID], recordType: conflict.zone.recordType,
                    scope: conflict.zone.scope, underlying: error))
            }
        } else {
            value = nil
        }
        let entry = PendingEntry<Record>(
            recordID: conflict.recordID, value: value, base: .stored(conflict.base), resolvedFields: conflict.localFields,
            timestamp: conflict.localTimestamp, firstSequence: 0, lastSequence: 0, number: 0)
        let (policy, writerID) = core.withLock { ($0.policy, $0.writerID) }
        let taken = SyncEngine<Record>.Conflict(entry: entry, current: conflict.current)
        switch resolve(taken, policy: policy, writerID: writerID, in: zone) {
        case .save(let fields, _, _): return .save(fields)
        case .delete: return .delete
        case .keepStored: return .keepRemote
        case .hold(let error): return .hold(error)
        }
    }
}
