/// The changes of one zone since a ``ChangeToken``, as returned by
/// ``RecordDatabase/changes(in:since:)``; or, with ``isComplete`` set, the whole zone.
public struct ChangeSet: Hashable, Sendable {
    /// The latest state of every record that changed, at most one entry per record, in the
    /// order of their last change. Deleted records appear as tombstones
    /// (``StoredRecord/isDeleted``) unless ``isComplete`` is set.
    public var records: [StoredRecord]
    /// The token to pass next time.
    public var token: ChangeToken
    /// When `true`, ``records`` lists every live record of the zone and no tombstones: the
    /// reader must drop every record it holds that is not listed. Returned for a token of
    /// an older generation (history was compacted since).
    public var isComplete: Bool

    /// Creates a change set.
    public init(records: [StoredRecord], token: ChangeToken, isComplete: Bool) {
        self.records = records
        self.token = token
        self.isComplete = isComplete
    }
}
