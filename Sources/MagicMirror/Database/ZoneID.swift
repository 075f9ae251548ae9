/// One record type in one scope (and, for the private scope, one user): the unit a
/// ``RecordDatabase`` stores, versions and notifies about.
///
/// Make one with ``public(_:)``, ``private(_:user:)-(_,MirrorUser)`` or ``shared(_:user:)-(_,MirrorUser)``:
///
/// ```swift
/// let alice = try MirrorUser(name: "alice")
/// let everyone = ZoneID.public("Todo")
/// let mine = ZoneID.private("Todo", user: alice)
/// let sharedWithAlice = ZoneID.shared("Todo", user: alice)
/// ```
///
/// The forms that take a user name as a `String` (``private(_:user:)-(_,String)``) are for
/// names read from elsewhere (a database, a command line); they are checked when the zone
/// is used, where a ``MirrorUser`` was checked when it was made.
///
/// Record types and user names become directory names in the JSON-file database, so they
/// must be valid names (see ``validate()``); databases check them before they use a zone.
public struct ZoneID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The zone's scope.
    public let scope: Scope
    /// The record type stored in the zone.
    public let recordType: String
    /// The name of the owner of a private zone, or of the recipient of a shared zone; `nil`
    /// for a public zone.
    public let user: String?

    private init(scope: Scope, recordType: String, user: String?) {
        self.scope = scope
        self.recordType = recordType
        self.user = user
    }

    /// The zone of a record type in the public scope.
    public static func `public`(_ recordType: String) -> ZoneID {
        ZoneID(scope: .public, recordType: recordType, user: nil)
    }

    /// The zone of a record type in the private scope of a user.
    public static func `private`(_ recordType: String, user: MirrorUser) -> ZoneID {
        ZoneID(scope: .private, recordType: recordType, user: user.name)
    }

    /// The zone of a record type in the shared scope of a user: the records of that type
    /// that other users shared with `user` (see <doc:SharingRecords>).
    public static func shared(_ recordType: String, user: MirrorUser) -> ZoneID {
        ZoneID(scope: .shared, recordType: recordType, user: user.name)
    }

    /// The zone of a record type in the private scope of the user named `user` (see
    /// ``private(_:user:)-(_,MirrorUser)``).
    public static func `private`(_ recordType: String, user: String) -> ZoneID {
        ZoneID(scope: .private, recordType: recordType, user: user)
    }

    /// The zone of a record type in the shared scope of the user named `user` (see
    /// ``shared(_:user:)-(_,MirrorUser)``).
    public static func shared(_ recordType: String, user: String) -> ZoneID {
        ZoneID(scope: .shared, recordType: recordType, user: user)
    }

    /// Checks that the record type and user name are valid names.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` naming the bad part.
    public func validate() throws(MirrorError) {
        try NameRules.check(recordType, as: "record type", scope: scope, recordType: recordType)
        if let user {
            try NameRules.check(user, as: "user name", scope: scope, recordType: recordType)
        }
    }

    /// The zone of `recordType` in `scope`, owned by `user` in the private scope (shared
    /// with `user` in the shared scope): the one check that a scope and its user agree, and
    /// that the names are valid.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid name, a user given with the
    ///   public scope (which has no owner), or none with the private or shared scope (which
    ///   need one).
    package init(_ recordType: String, scope: Scope, user: String?) throws(MirrorError) {
        switch (scope, user) {
        case (.public, nil):
            self = .public(recordType)
        case (.private, let user?):
            self = .private(recordType, user: user)
        case (.public, let user?):
            throw MirrorError(
                .invalidName,
                "the public scope has no owner, but user \(String(reflecting: user)) was given: "
                    + "give a user with the private scope only",
                recordType: recordType, scope: scope)
        case (.shared, let user?):
            self = .shared(recordType, user: user)
        case (.private, nil):
            throw MirrorError(
                .invalidName, "a private zone needs its owner: give a user",
                recordType: recordType, scope: scope)
        case (.shared, nil):
            throw MirrorError(
                .invalidName, "a shared zone needs its recipient: give a user",
                recordType: recordType, scope: scope)
        }
        try validate()
    }

    public var description: String {
        if let user { return "\(scope)/\(user)/\(recordType)" }
        return "\(scope)/\(recordType)"
    }

    private enum CodingKeys: String, CodingKey { case scope, recordType, user }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let scope = try container.decode(Scope.self, forKey: .scope)
        let recordType = try container.decode(String.self, forKey: .recordType)
        let user = try container.decodeIfPresent(String.self, forKey: .user)
        do {
            self = try ZoneID(recordType, scope: scope, user: user)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .user, in: container, debugDescription: error.message)
        }
    }
}
