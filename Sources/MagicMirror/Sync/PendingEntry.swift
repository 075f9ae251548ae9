import Foundation

/// One record's local change waiting to be committed, inside a mirror.
///
/// Later changes to the same record made before it is sent are folded into it. While it is
/// being committed, a newer change to the record waits in a second entry whose base is the
/// outcome of the first (``basePending``).
struct PendingEntry<Record: Recordable>: Sendable {
    let recordID: String
    /// The record to save; `nil` to delete it.
    var value: Record?
    /// The stored record the change was made against; `nil` when the mirror knew none.
    var base: StoredRecord?
    /// The base is the result of the change being committed right now for this record.
    var basePending = false
    /// Fields to save instead of encoding ``value`` (the result of a merge).
    var resolvedFields: Data?
    /// When the latest change folded into the entry was made.
    var timestamp: HLCTimestamp
    /// Timestamps this record's changes were sent under before; if the stored record carries
    /// one of them, it is this mirror's own earlier attempt.
    var earlierTimestamps: [HLCTimestamp] = []
    /// The mirror's change sequence numbers of the first and last change folded in.
    var firstSequence: Int
    var lastSequence: Int
    var failedAttempts = 0
    var lastError: MirrorError?
    /// Failed for a reason retrying cannot fix; not retried until the record changes again
    /// or `flush()` asks.
    var isOnHold = false
    /// Identifies the entry's current place in the commit queue.
    var number: Int

    /// Whether the change creates the record: the mirror knew no live stored version.
    var isCreation: Bool { base.map(\.isDeleted) ?? true }

    /// The version the change is based on.
    var baseVersion: Int { base?.version ?? 0 }

    /// The kind of change the entry makes, for ``MirrorChange``.
    var changeKind: MirrorChange<Record>.Kind {
        if value == nil { return .removed }
        return isCreation ? .inserted : .updated
    }

    var publicForm: PendingChange {
        PendingChange(
            recordID: recordID, action: value == nil ? .delete : .save, timestamp: timestamp,
            failedAttempts: failedAttempts, lastError: lastError, isCommitting: false,
            isOnHold: isOnHold)
    }
}
