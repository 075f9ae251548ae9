/// One record type in one scope (and, for the private scope, one user): the unit a
/// ``RecordDatabase`` stores, versions and notifies about.
///
/// Make one with ``public(_:)`` or ``private(_:user:)``:
///
/// ```swift
/// let shared = ZoneID.public("Todo")
/// let mine = ZoneID.private("Todo", user: "alice")
/// ```
///
/// Record types and user names become directory names in the JSON-file database, so they
/// must be valid names (see ``validate()``); databases check them before they use a zone.
public struct ZoneID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The zone's scope.
    public let scope: Scope
    /// The record type stored in the zone.
    public let recordType: String
    /// The owner of a private zone; `nil` for a public zone.
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
    public static func `private`(_ recordType: String, user: String) -> ZoneID {
        ZoneID(scope: .private, recordType: recordType, user: user)
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
        switch (scope, user) {
        case (.public, nil): self = .public(recordType)
        case (.private, let user?): self = .private(recordType, user: user)
        case (.public, _?):
            throw DecodingError.dataCorruptedError(
                forKey: .user, in: container, debugDescription: "a public zone has no user")
        case (.private, nil):
            throw DecodingError.dataCorruptedError(
                forKey: .user, in: container, debugDescription: "a private zone needs a user")
        }
    }
}
