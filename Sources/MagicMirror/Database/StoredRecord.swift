import Foundation

/// One record as a ``RecordDatabase`` stores it: its id, version, fields, the clock
/// reading and writer of the change that produced it, and the clock reading of its creation.
///
/// ``fields`` holds the record's Codable fields as the UTF-8 bytes of one JSON object. A
/// record whose ``fields`` is `nil` is a *tombstone*: the record was deleted by that change.
public struct StoredRecord: Hashable, Sendable {
    /// The record's id, unique within its zone.
    public var id: String
    /// Starts at 1 when the record is created and grows by one with every change to it,
    /// including its deletion.
    public var version: Int
    /// The record's fields as a JSON object, or `nil` when the record is deleted.
    public var fields: Data?
    /// When the change that produced this version was made.
    public var modified: HLCTimestamp
    /// The id of the writer (one database instance in one process) that made the change.
    public var writer: String
    /// When the record was created: the clock reading of the save that stored it while it
    /// did not exist (or was deleted). Later saves carry it over unchanged.
    ///
    /// The database sets it, whatever a writer sends; `(created, id)` is the order in which
    /// a ``Mirror`` shows its records, the same in every process and after every reopen.
    public var created: HLCTimestamp

    /// Creates a stored record.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - version: The record's version, starting at 1.
    ///   - fields: The record's fields as a JSON object, or `nil` for a tombstone.
    ///   - modified: When the change that produced this version was made.
    ///   - writer: The id of the writer that made the change.
    ///   - created: When the record was created; `modified` when `nil` (right for version 1).
    public init(
        id: String, version: Int, fields: Data?, modified: HLCTimestamp, writer: String,
        created: HLCTimestamp? = nil
    ) {
        self.id = id
        self.version = version
        self.fields = fields
        self.modified = modified
        self.writer = writer
        self.created = created ?? modified
    }

    /// Whether this is a tombstone: the record was deleted.
    public var isDeleted: Bool { fields == nil }
}

extension StoredRecord {
    /// The version a change to a record at `version` stores: one up, except at `Int.max`,
    /// which stays (another program, or a role writing SQL, can store that version; one up
    /// from it would trap). Such a record keeps taking changes, and a concurrent change to it
    /// is no longer told apart by its version.
    package static func version(after version: Int) -> Int {
        version < .max ? version + 1 : version
    }
}

