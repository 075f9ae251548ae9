/// One change to a record in a ``Mirror``'s ``Mirror/dataModel``, as delivered by
/// ``Mirror/changes()``.
///
/// A local change is delivered twice: once when it is made (``state`` is
/// ``State/pending``) and once when the database has stored it (``State/committed``).
/// A change made by another writer is delivered once, already committed.
///
/// ```swift
/// for await change in mirror.changes() {
///     switch (change.kind, change.origin, change.state) {
///     case (.inserted, .remote, _): print("someone added \(change.recordID)")
///     case (_, .local, .committed): print("saved \(change.recordID)")
///     default: break
///     }
/// }
/// ```
public struct MirrorChange<Record: Recordable>: Sendable, Equatable {
    /// What happened to the record.
    public enum Kind: Sendable, Hashable {
        /// The record was added.
        case inserted
        /// Some of the record's fields changed.
        case updated
        /// The record was removed.
        case removed
    }

    /// Where the change came from.
    public enum Origin: Sendable, Hashable {
        /// Made through this mirror's ``Mirror/dataModel``.
        case local
        /// Made by another mirror, process or writer of the database, or the result of
        /// resolving a conflict with one.
        case remote
    }

    /// Whether the database has stored the change yet.
    public enum State: Sendable, Hashable {
        /// Applied to ``Mirror/dataModel`` and waiting to be committed.
        case pending
        /// Stored by the database.
        case committed
    }

    /// What happened.
    public var kind: Kind
    /// The id of the record.
    public var recordID: String
    /// The record after the change; `nil` when it was removed (or when a committed change
    /// stored fields that no longer decode).
    public var record: Record?
    /// Where the change came from.
    public var origin: Origin
    /// Whether it is committed yet.
    public var state: State

    /// Creates a change.
    public init(kind: Kind, recordID: String, record: Record?, origin: Origin, state: State) {
        self.kind = kind
        self.recordID = recordID
        self.record = record
        self.origin = origin
        self.state = state
    }

    /// Whether the change is waiting to be committed.
    public var isPending: Bool { state == .pending }
}
