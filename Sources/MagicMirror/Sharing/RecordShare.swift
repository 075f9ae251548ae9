/// One record of one owner shared with one recipient: what ``Mirror/shares()`` and
/// ``SharingDatabase/shares(in:)`` list.
public struct RecordShare: Hashable, Sendable, CustomStringConvertible {
    /// The id of the shared record.
    public var recordID: String
    /// The record type of the shared record.
    public var recordType: String
    /// The user whose private record is shared.
    public var owner: MirrorUser
    /// The user the record is shared with.
    public var recipient: MirrorUser
    /// What the recipient may do with the record.
    public var access: ShareAccess

    /// Creates a share.
    ///
    /// - Parameters:
    ///   - recordID: The id of the shared record.
    ///   - recordType: Its record type.
    ///   - owner: The user whose private record it is.
    ///   - recipient: The user it is shared with.
    ///   - access: What the recipient may do with it.
    public init(recordID: String, recordType: String, owner: MirrorUser, recipient: MirrorUser, access: ShareAccess) {
        self.recordID = recordID
        self.recordType = recordType
        self.owner = owner
        self.recipient = recipient
        self.access = access
    }

    /// `shares` ordered by record id (its bytes), then owner and recipient.
    package static func ordered(_ shares: [RecordShare]) -> [RecordShare] {
        shares.sorted { left, right in
            if !IDKey.same(left.recordID, right.recordID) {
                return left.recordID.utf8.lexicographicallyPrecedes(right.recordID.utf8)
            }
            return (left.owner.name, left.recipient.name) < (right.owner.name, right.recipient.name)
        }
    }

    public var description: String {
        "\(recordType) \(String(reflecting: recordID)) of \(owner), shared with \(recipient) (\(access))"
    }
}
