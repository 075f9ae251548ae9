/// Who can see the records of a zone.
///
/// - ``public``: every user of the database reads and writes them.
/// - ``private``: only their owner. On disk a private zone lives under the owner's
///   directory, which is created with mode 0700 and files 0600.
public enum Scope: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Records every user of the database can read and write.
    case `public`
    /// Records only their owner can read and write.
    case `private`

    public var description: String { rawValue }
}
