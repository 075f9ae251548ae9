import Foundation

/// One change to commit: save a record's fields, or delete it, based on the version of the
/// record the change was made against.
///
/// ``baseVersion`` is the version the writer last saw (0 for a record it believes is new).
/// When the stored version has moved on, the commit reports a conflict for this record
/// instead of applying it.
///
/// ``timestamp`` is taken when the change is *made* and kept across retries; a database
/// recognises a retry of a change it already stored (same writer, same timestamp) and
/// reports it as applied rather than as a conflict, which makes commits idempotent.
public struct RecordOperation: Hashable, Sendable {
    /// What the operation does.
    public enum Action: Hashable, Sendable {
        /// Store these fields (the UTF-8 bytes of a JSON object) as the record's new version.
        case save(Data)
        /// Delete the record.
        case delete
    }

    /// The id of the record to change.
    public var recordID: String
    /// The version the change was based on; 0 when the record is new.
    public var baseVersion: Int
    /// What to do.
    public var action: Action
    /// When the change was made.
    public var timestamp: HLCTimestamp

    /// Creates an operation.
    ///
    /// - Parameters:
    ///   - recordID: The id of the record to change.
    ///   - baseVersion: The version the change was based on; 0 when the record is new.
    ///   - action: Save fields or delete.
    ///   - timestamp: When the change was made; keep it when retrying the same change.
    public init(recordID: String, baseVersion: Int, action: Action, timestamp: HLCTimestamp) {
        self.recordID = recordID
        self.baseVersion = baseVersion
        self.action = action
        self.timestamp = timestamp
    }

    /// A save of `fields` (a JSON object) based on `baseVersion`.
    public static func save(
        _ recordID: String, fields: Data, baseVersion: Int, timestamp: HLCTimestamp
    ) -> RecordOperation {
        RecordOperation(recordID: recordID, baseVersion: baseVersion, action: .save(fields), timestamp: timestamp)
    }

    /// A deletion based on `baseVersion`.
    public static func delete(
        _ recordID: String, baseVersion: Int, timestamp: HLCTimestamp
    ) -> RecordOperation {
        RecordOperation(recordID: recordID, baseVersion: baseVersion, action: .delete, timestamp: timestamp)
    }
}

/// What a commit did with each of its operations.
///
/// A commit is atomic: either every operation was applied (``isApplied``), or, when at
/// least one operation conflicted, none was, and ``results`` says which ones conflicted
/// and which were only held back with them.
public struct CommitOutcome: Hashable, Sendable {
    /// What happened to one operation.
    public enum Result: Hashable, Sendable {
        /// The operation was stored; this is the record as stored now (a tombstone for a
        /// deletion).
        case applied(StoredRecord)
        /// The record changed since the operation's base version. `current` is the record
        /// as stored now: a tombstone if it was deleted, `nil` if it does not exist.
        case conflict(current: StoredRecord?)
        /// The operation was valid but was not applied, because another operation of the
        /// same commit conflicted.
        case notApplied
    }

    /// One result per operation, in the order of the operations.
    public var results: [Result]
    /// The zone's token after the commit (unchanged when nothing was applied).
    public var token: ChangeToken

    /// Creates an outcome.
    public init(results: [Result], token: ChangeToken) {
        self.results = results
        self.token = token
    }

    /// Whether every operation was applied.
    public var isApplied: Bool {
        results.allSatisfy { if case .applied = $0 { true } else { false } }
    }
}
