import Foundation

/// A type whose values a `Mirror` keeps in sync with a database.
///
/// A struct with an `id` of type `UUID` or `String` conforms in one line:
///
/// ```swift
/// struct Todo: Recordable {
///     var id = UUID()
///     var title: String
///     var done = false
/// }
/// ```
///
/// Values are stored as JSON objects of their `Codable` fields, one record per value, in
/// the zone named by ``recordType`` (the type's name unless you say otherwise). Two values
/// are the same record when their ``recordID``s have the same UTF-8 bytes: `"e\u{301}"` and
/// `"\u{e9}"`, equal as Swift strings, are two records.
///
/// ## Changing the type
///
/// Adding an optional field needs nothing. Adding a field with a default value takes one
/// line, a migration that gives stored records the default:
///
/// ```swift
/// struct Todo: Recordable {
///     var id = UUID()
///     var title: String
///     var done = false
///     var priority = 0
///
///     static let migrations: [RecordMigration] = [.add("priority", default: 0)]
/// }
/// ```
///
/// Renaming, retyping, splitting, joining or dropping fields are migrations too (see
/// ``RecordMigration`` and <doc:ChangingYourRecordTypes>). Stored fields the type does not
/// know (written by a newer version of the app) are kept whenever a record is saved.
///
/// ## Records that do not decode
///
/// A stored record that still does not decode — a field added without a migration is the
/// usual cause — is never dropped without a word. By default
/// (``UndecodableRecordPolicy/skip``) the mirror opens without it and:
///
/// - lists it in ``Mirror/skippedRecords``, with the error that names the field and the
///   schema versions, and the migration that would fix a missing field;
/// - reports it once as ``MirrorError/Kind/decodingFailed`` (on ``Mirror/errors()``, as
///   ``Mirror/lastError`` and as a `.mirrorError` notification);
/// - in debug builds, writes one line about the records skipped to standard error.
///
/// It is left untouched in the database and loads once a migration makes it decode. The
/// mirror never overwrites it: appending a record with its id (an older version of the app
/// creating a default record that a newer version already stored, say) is refused, reported
/// as ``MirrorError/Kind/refused`` naming the id, and the stored record survives;
/// ``Mirror/discardSkippedRecord(recordID:)`` deletes it on purpose, to replace it. Open
/// with ``MirrorConfiguration/undecodableRecords`` set to ``UndecodableRecordPolicy/fail`` to
/// make opening throw instead:
///
/// ```swift
/// let notes = try await Mirror<Todo>(
///     database: database, configuration: MirrorConfiguration(undecodableRecords: .fail))
/// ```
///
/// > Important: Changing ``recordType`` or the way ``recordID`` is formed points the type at
/// > different stored records.
public protocol Recordable: Identifiable, Codable, Sendable, Equatable {
    /// The name of the zone the records are stored in; the type's name by default.
    ///
    /// It must be a valid name: not empty, at most 255 bytes, no `/` or NUL, not `.` or `..`,
    /// and in Unicode Normalization Form C (it names a directory).
    static var recordType: String { get }

    /// The record's identity in the database, derived from `id` by default: a `String` id
    /// as it is, a `UUID` as its `uuidString` (upper case, `"E621E1F8-C36C-495A-93FC-0C247A3E6E5F"`).
    /// Must be a valid name like ``recordType``.
    var recordID: String { get }

    /// The steps that bring records stored by older versions of the type up to date, oldest
    /// first; none by default.
    ///
    /// The type's schema version is the number of migrations plus one. Append new steps at
    /// the end and never reorder or remove one: stored records name the schema version they
    /// were written in (in their `"$schemaVersion"` field, absent for version 1).
    ///
    /// Declare it as a `static let`, so that it is built once.
    static var migrations: [RecordMigration] { get }

    /// What deleting a record this type refers to does to the referring records: cascade,
    /// nullify or deny, per ``Reference`` field; none by default (see <doc:Relationships>).
    ///
    /// Declare it as a `static let`. A ``Mirror`` of the type stores the rules in its
    /// database when it opens, and every writer of the database enforces them from then on.
    static var deleteRules: [DeleteRule<Self>] { get }
}

extension Recordable {
    public static var recordType: String { String(describing: Self.self) }

    /// No migrations: the type is at schema version 1.
    public static var migrations: [RecordMigration] { [] }
}

extension Recordable where ID == UUID {
    public var recordID: String { UUIDText.string(id) }
}

extension Recordable where ID == String {
    public var recordID: String { id }
}
