/// What the recipient of a shared record may do with it.
///
/// Both let the recipient read the record in a ``Scope/shared`` mirror. Neither lets the
/// recipient delete it, create records in the owner's scope, or share it on: those stay
/// with the owner.
public enum ShareAccess: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The recipient reads the record; an edit is refused (``MirrorError/Kind/refused``).
    case readOnly
    /// The recipient reads the record and edits it: an edit is committed to the owner's
    /// record, under the recipient's mirror's conflict policy.
    case readWrite

    public var description: String { rawValue }
}
