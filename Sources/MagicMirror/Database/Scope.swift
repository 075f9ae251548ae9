/// Who can see the records of a zone.
///
/// - ``public``: every user of the database reads and writes them.
/// - ``private``: only their owner. On disk a private zone lives under the owner's
///   directory, which is created with mode 0700 and files 0600.
/// - ``shared``: the records other users shared with one user, out of their private
///   scopes (see <doc:SharingRecords>).
public enum Scope: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Records every user of the database can read and write.
    case `public`
    /// Records only their owner can read and write.
    case `private`
    /// Records other users shared with one user (a recipient), read from their owners'
    /// private scopes; see <doc:SharingRecords>.
    case shared

    public var description: String { rawValue }
}
