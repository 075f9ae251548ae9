/// A stored record that a ``Mirror`` does not show because it does not decode as the
/// mirror's record type.
///
/// ``Mirror/skippedRecords`` lists them. A skipped record is left untouched in the database:
/// a migration that makes it decode (see <doc:ChangingYourRecordTypes>) brings it back the
/// next time a mirror opens, and a newer version of it that decodes, saved by another
/// writer, shows at once. The mirror forgets it when it is deleted. An edit that adds a
/// record with its id is refused rather than overwrite it (see ``Mirror/skippedRecords``);
/// ``Mirror/discardSkippedRecord(recordID:)`` deletes it on purpose.
public struct SkippedRecord: Sendable, CustomStringConvertible {
    /// The record's id.
    public var recordID: String
    /// The version of the stored record that did not decode (``StoredRecord/version``).
    public var version: Int
    /// Why it does not decode: a ``MirrorError/Kind/decodingFailed`` error naming the field
    /// and the schema versions (the same error the mirror reported).
    public var error: MirrorError

    /// Creates a description of a skipped record.
    public init(recordID: String, version: Int, error: MirrorError) {
        self.recordID = recordID
        self.version = version
        self.error = error
    }

    /// The error's message: the record, the field and the schema versions.
    public var description: String { error.message }
}
