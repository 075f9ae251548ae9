/// A local change a ``Mirror`` has applied to its array but the database has not stored
/// yet, as listed by ``Mirror/pendingChanges``.
///
/// Several changes to one record made before it is committed are combined into one pending
/// change. A change stays pending until it is committed, however often committing it
/// fails; ``lastError`` says why the last attempt failed.
public struct PendingChange: Sendable, CustomStringConvertible {
    /// What the change will do to the stored record.
    public enum Action: Sendable, Hashable {
        /// Store the record's fields.
        case save
        /// Delete the record.
        case delete
    }

    /// The id of the record.
    public var recordID: String
    /// What the change will do.
    public var action: Action
    /// When the latest change to the record was made.
    public var timestamp: HLCTimestamp
    /// How many attempts to commit it have failed.
    public var failedAttempts: Int
    /// Why the last attempt failed, if one did.
    public var lastError: MirrorError?
    /// Whether it is being committed right now.
    public var isCommitting: Bool
    /// Whether the mirror stopped retrying it by itself because it failed for a reason that
    /// retrying cannot fix (for example an invalid record id). ``Mirror/flush()`` tries it
    /// again; so does the next change to the record. ``Mirror/discardPendingChange(recordID:)``
    /// drops it.
    public var isOnHold: Bool

    /// Creates a pending change.
    public init(
        recordID: String, action: Action, timestamp: HLCTimestamp, failedAttempts: Int = 0,
        lastError: MirrorError? = nil, isCommitting: Bool = false, isOnHold: Bool = false
    ) {
        self.recordID = recordID
        self.action = action
        self.timestamp = timestamp
        self.failedAttempts = failedAttempts
        self.lastError = lastError
        self.isCommitting = isCommitting
        self.isOnHold = isOnHold
    }

    /// For example `save 1F2E… (2 failed attempts)`.
    public var description: String {
        var text = "\(action == .save ? "save" : "delete") \(recordID)"
        if failedAttempts > 0 { text += " (\(failedAttempts) failed attempt\(failedAttempts == 1 ? "" : "s"))" }
        if isOnHold { text += " on hold" }
        return text
    }
}
