import Foundation

/// One record's local change waiting to be committed, inside a mirror's ``CommitQueue``
/// (its public form is ``PendingChange``).
///
/// Later changes to the same record made before it is sent are folded into it. While it is
/// being committed, a newer change to the record waits in a second entry whose base is the
/// outcome of the first (``Base/outcomeOfCommitInFlight``).
struct PendingEntry<Record: Recordable>: Sendable {
    /// What the change was made against.
    enum Base: Sendable {
        /// The stored record the mirror knew (`nil`: none).
        case stored(StoredRecord?)
        /// The outcome of the commit of this record in flight right now: known once it
        /// returns.
        case outcomeOfCommitInFlight
    }

    /// Where the entry stands in the commit queue.
    enum Standing: Sendable, Equatable {
        /// Waits its turn (or a retry).
        case queued
        /// Failed for a reason retrying cannot fix; not retried until the record changes
        /// again or `flush()` asks.
        case onHold
    }

    let recordID: String
    /// The record to save; `nil` to delete it.
    var value: Record?
    var baseState: Base
    var standing = Standing.queued
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
    /// Identifies the entry's current place in the commit queue.
    var number: Int

    init(
        recordID: String, value: Record?, base: Base = .stored(nil), resolvedFields: Data? = nil,
        timestamp: HLCTimestamp, firstSequence: Int, lastSequence: Int, number: Int = 0
    ) {
        self.recordID = recordID
        self.value = value
        self.baseState = base
        self.resolvedFields = resolvedFields
        self.timestamp = timestamp
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.number = number
    }

    /// The stored record the change was made against; `nil` when the mirror knew none, or
    /// while it waits for the outcome of the commit in flight.
    var base: StoredRecord? {
        get {
            if case .stored(let record) = baseState { return record }
            return nil
        }
        set { baseState = .stored(newValue) }
    }

    /// Whether the base is the outcome of the commit in flight (not known yet).
    var awaitsCommitInFlight: Bool {
        if case .outcomeOfCommitInFlight = baseState { return true }
        return false
    }

    var isOnHold: Bool { standing == .onHold }

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
