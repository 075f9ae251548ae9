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
/// > Important: Changing ``recordType`` or the way ``recordID`` is formed points the type at
/// > different stored records. Adding an optional field is safe; renaming or retyping a
/// > field makes old records fail to decode, which is reported per record
/// > (``MirrorError/Kind/decodingFailed``) and leaves them untouched in the database.
public protocol Recordable: Identifiable, Codable, Sendable, Equatable {
    /// The name of the zone the records are stored in; the type's name by default.
    ///
    /// It must be a valid name: not empty, at most 255 bytes, no `/` or NUL, not `.` or `..`,
    /// and in Unicode Normalization Form C (it names a directory).
    static var recordType: String { get }

    /// The record's identity in the database, derived from `id` by default for `UUID`
    /// and `String` ids. Must be a valid name like ``recordType``.
    var recordID: String { get }
}

extension Recordable {
    public static var recordType: String { String(describing: Self.self) }
}

extension Recordable where ID == UUID {
    public var recordID: String { id.uuidString }
}

extension Recordable where ID == String {
    public var recordID: String { id }
}
