/// A hint that records of one zone changed in a database: which records, how, and the
/// zone's change token after the change.
///
/// A database produces one for every commit it sees, made by this process or another.
/// Receivers treat it as a hint, not as data: a mirror that gets one pulls the changes
/// since its own token, so a missed, repeated or reordered notification leaves it correct.
public struct RemoteNotification: Hashable, Sendable, Codable {
    /// Why the records changed.
    public enum Reason: String, Hashable, Sendable, Codable {
        /// The records were created.
        case created
        /// Existing records were changed.
        case updated
        /// The records were deleted.
        case deleted
    }

    /// The ``RecordDatabase/identifier`` of the database that changed.
    public var databaseIdentifier: String
    /// The zone that changed.
    public var zone: ZoneID
    /// The ids of the records that changed.
    public var recordIDs: [String]
    /// Why they changed.
    public var reason: Reason
    /// The zone's token after the change.
    public var token: ChangeToken
    /// The writer that made the change, when known.
    public var writer: String?

    /// Creates a notification.
    public init(
        databaseIdentifier: String, zone: ZoneID, recordIDs: [String], reason: Reason,
        token: ChangeToken, writer: String? = nil
    ) {
        self.databaseIdentifier = databaseIdentifier
        self.zone = zone
        self.recordIDs = recordIDs
        self.reason = reason
        self.token = token
        self.writer = writer
    }

    /// The zone's scope.
    public var scope: Scope { zone.scope }
    /// The zone's record type.
    public var recordType: String { zone.recordType }
}
