/// The changes of one zone since a ``ChangeToken``, as returned by
/// ``RecordDatabase/changes(in:since:)``; or, with ``isComplete`` set, the whole zone.
public struct ChangeSet: Hashable, Sendable {
    /// The latest state of every record that changed, at most one entry per record, in the
    /// order of their last change. Deleted records appear as tombstones
    /// (``StoredRecord/isDeleted``) unless ``isComplete`` is set.
    public var records: [StoredRecord] {
        didSet { recordsByID = nil }
    }
    /// The token to pass next time.
    public var token: ChangeToken
    /// When `true`, ``records`` lists every live record of the zone and no tombstones: the
    /// reader must drop every record it holds that is not listed. Returned for a token of
    /// an older generation (history was compacted since).
    public var isComplete: Bool
    /// ``records`` by id, when the database hands out its own table of them (a complete set
    /// of a zone without tombstones, see ``ZoneState/completeChangeSet``): a mirror keeps it
    /// as its stored versions instead of building a copy, the two sharing one table until
    /// either changes. Dropped whenever ``records`` changes; not part of equality.
    package private(set) var recordsByID: IDMap<StoredRecord>?

    /// Creates a change set.
    public init(records: [StoredRecord], token: ChangeToken, isComplete: Bool) {
        self.records = records
        self.token = token
        self.isComplete = isComplete
    }

    /// A complete change set of every record of `table`, none of them a tombstone.
    package init(complete table: IDMap<StoredRecord>, token: ChangeToken) {
        self.init(records: table.values, token: token, isComplete: true)
        recordsByID = table
    }

    /// Whether both hold the same records, token and completeness.
    public static func == (lhs: ChangeSet, rhs: ChangeSet) -> Bool {
        lhs.records == rhs.records && lhs.token == rhs.token && lhs.isComplete == rhs.isComplete
    }

    /// Hashes the records, token and completeness.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(records)
        hasher.combine(token)
        hasher.combine(isComplete)
    }
}
