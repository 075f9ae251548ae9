import Foundation

/// One record as a ``RecordDatabase`` stores it: its id, version, fields and the clock
/// reading and writer of the change that produced it.
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

    /// Creates a stored record.
    public init(id: String, version: Int, fields: Data?, modified: HLCTimestamp, writer: String) {
        self.id = id
        self.version = version
        self.fields = fields
        self.modified = modified
        self.writer = writer
    }

    /// Whether this is a tombstone: the record was deleted.
    public var isDeleted: Bool { fields == nil }
}
