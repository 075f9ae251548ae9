import Foundation

/// The forms a ``RemoteNotification`` travels in: a `userInfo` dictionary (the shape push
/// payloads and `Notification`s have) and JSON, so an app can carry one over any transport
/// it has — a socket, a message queue, a push service — and hand it to a
/// ``NotificationConverter`` on the other side.
///
/// Both forms are the same flat object, marked by the key `"magicmirror"` (the format
/// version, `1`):
///
/// ```json
/// {"database":"6F1C…","magicmirror":1,"reason":"updated","recordIDs":["a1","b2"],
///  "recordType":"Todo","scope":"private","token":{"generation":1,"sequence":42},
///  "user":"alice","writer":"jsonfile-8c1f…"}
/// ```
///
/// `user` is present only for the private scope and `writer` only when known. Readers ignore
/// keys they do not know, so later versions may add keys; a change that old readers could
/// not ignore would use another marker.
extension RemoteNotification {
    /// The key that marks a MagicMirror payload; its value is the payload's format version.
    public static let payloadMarker = "magicmirror"

    /// The version of the payload format this library writes.
    public static let payloadVersion = 1

    /// The keys of the payload, in both the `userInfo` and the JSON form.
    private enum CodingKeys: String, CodingKey {
        case marker = "magicmirror"
        case database, scope, user, recordType, recordIDs, reason, token, writer
    }

    private enum TokenKeys: String, CodingKey {
        case generation, sequence
    }

    // MARK: userInfo

    /// The notification as a `userInfo` dictionary: string keys, and only values that
    /// property lists and JSON can hold (strings, integers, arrays and dictionaries of
    /// them).
    ///
    /// Send it as a push payload or post it in a `Notification`; ``init(userInfo:)`` or a
    /// ``NotificationConverter`` reads it back.
    public var userInfo: [AnyHashable: Any] {
        var info: [AnyHashable: Any] = [
            CodingKeys.marker.rawValue: Self.payloadVersion,
            CodingKeys.database.rawValue: databaseIdentifier,
            CodingKeys.scope.rawValue: zone.scope.rawValue,
            CodingKeys.recordType.rawValue: zone.recordType,
            CodingKeys.recordIDs.rawValue: recordIDs,
            CodingKeys.reason.rawValue: reason.rawValue,
            CodingKeys.token.rawValue: [
                TokenKeys.generation.rawValue: token.generation,
                TokenKeys.sequence.rawValue: token.sequence,
            ],
        ]
        if let user = zone.user { info[CodingKeys.user.rawValue] = user }
        if let writer { info[CodingKeys.writer.rawValue] = writer }
        return info
    }

    /// Reads a notification from a `userInfo` dictionary made by ``userInfo``, or by
    /// `JSONSerialization` from the JSON form.
    ///
    /// Returns `nil` for a dictionary that is not a MagicMirror payload (no `"magicmirror"`
    /// key) or that is malformed: a missing or mistyped field, an unknown scope or reason, a
    /// negative token, or a record type, user name or record id that is not a valid name.
    /// It never traps, whatever the dictionary holds.
    ///
    /// - Parameter userInfo: A received payload.
    public init?(userInfo: [AnyHashable: Any]) {
        guard let version = Self.integer(userInfo[CodingKeys.marker.rawValue]), version >= 1,
              let database = userInfo[CodingKeys.database.rawValue] as? String, !database.isEmpty,
              let scopeName = userInfo[CodingKeys.scope.rawValue] as? String,
              let scope = Scope(rawValue: scopeName),
              let recordType = userInfo[CodingKeys.recordType.rawValue] as? String,
              let recordIDs = Self.strings(userInfo[CodingKeys.recordIDs.rawValue]),
              let reasonName = userInfo[CodingKeys.reason.rawValue] as? String,
              let reason = Reason(rawValue: reasonName),
              let tokenInfo = userInfo[CodingKeys.token.rawValue] as? [AnyHashable: Any],
              let generation = Self.integer(tokenInfo[TokenKeys.generation.rawValue]),
              let sequence = Self.integer(tokenInfo[TokenKeys.sequence.rawValue])
        else { return nil }
        let user = userInfo[CodingKeys.user.rawValue]
        let writer = userInfo[CodingKeys.writer.rawValue]
        guard user == nil || user is String, writer == nil || writer is String else { return nil }
        guard let zone = Self.zone(scope, recordType, user: user as? String) else { return nil }
        let token = ChangeToken(generation: generation, sequence: sequence)
        guard Self.problem(recordIDs: recordIDs, token: token) == nil else { return nil }
        self.init(
            databaseIdentifier: database, zone: zone, recordIDs: recordIDs, reason: reason,
            token: token, writer: writer as? String)
    }

    // MARK: JSON

    /// The notification's JSON form: one flat object with sorted keys (see the extension's
    /// discussion).
    ///
    /// - Throws: ``MirrorError/Kind/encodingFailed`` if it cannot be encoded.
    public func jsonData() throws(MirrorError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(self)
        } catch {
            throw MirrorError(
                .encodingFailed, "a remote notification could not be encoded as JSON",
                recordIDs: recordIDs, recordType: recordType, scope: scope, underlying: error)
        }
    }

    /// Reads a notification from its JSON form.
    ///
    /// - Parameter jsonData: The bytes of a JSON object made by ``jsonData()`` (or by
    ///   `JSONSerialization` from ``userInfo``).
    /// - Throws: ``MirrorError/Kind/decodingFailed`` when the data is not JSON, not a
    ///   MagicMirror payload, or malformed (the same checks as ``init(userInfo:)``).
    public init(jsonData: Data) throws(MirrorError) {
        do {
            self = try JSONDecoder().decode(RemoteNotification.self, from: jsonData)
        } catch {
            throw MirrorError(
                .decodingFailed, "not a MagicMirror remote notification: \(Self.reason(for: error))",
                underlying: error)
        }
    }

    // MARK: Codable

    /// Decodes the flat payload form (see the extension's discussion).
    ///
    /// - Throws: `DecodingError` when the marker is missing or a field is missing, mistyped
    ///   or invalid.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let version = try container.decode(Int.self, forKey: .marker)
        guard version >= 1 else {
            throw DecodingError.dataCorruptedError(
                forKey: .marker, in: container, debugDescription: "unknown payload version \(version)")
        }
        let database = try container.decode(String.self, forKey: .database)
        guard !database.isEmpty else {
            throw DecodingError.dataCorruptedError(
                forKey: .database, in: container, debugDescription: "the database identifier is empty")
        }
        let scope = try container.decode(Scope.self, forKey: .scope)
        let recordType = try container.decode(String.self, forKey: .recordType)
        let user = try container.decodeIfPresent(String.self, forKey: .user)
        guard let zone = Self.zone(scope, recordType, user: user) else {
            throw DecodingError.dataCorruptedError(
                forKey: .recordType, in: container,
                debugDescription: "not a valid zone: scope \(scope), record type "
                    + "\(String(reflecting: recordType)), user \(String(reflecting: user))")
        }
        let tokens = try container.nestedContainer(keyedBy: TokenKeys.self, forKey: .token)
        let token = ChangeToken(
            generation: try tokens.decode(Int.self, forKey: .generation),
            sequence: try tokens.decode(Int.self, forKey: .sequence))
        let recordIDs = try container.decode([String].self, forKey: .recordIDs)
        if let problem = Self.problem(recordIDs: recordIDs, token: token) {
            throw DecodingError.dataCorruptedError(
                forKey: .recordIDs, in: container, debugDescription: problem)
        }
        self.init(
            databaseIdentifier: database, zone: zone, recordIDs: recordIDs,
            reason: try container.decode(Reason.self, forKey: .reason), token: token,
            writer: try container.decodeIfPresent(String.self, forKey: .writer))
    }

    /// Encodes the flat payload form (see the extension's discussion).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.payloadVersion, forKey: .marker)
        try container.encode(databaseIdentifier, forKey: .database)
        try container.encode(zone.scope, forKey: .scope)
        try container.encodeIfPresent(zone.user, forKey: .user)
        try container.encode(zone.recordType, forKey: .recordType)
        try container.encode(recordIDs, forKey: .recordIDs)
        try container.encode(reason, forKey: .reason)
        var tokens = container.nestedContainer(keyedBy: TokenKeys.self, forKey: .token)
        try tokens.encode(token.generation, forKey: .generation)
        try tokens.encode(token.sequence, forKey: .sequence)
        try container.encodeIfPresent(writer, forKey: .writer)
    }

    // MARK: Checks shared by both forms

    /// The zone named by a payload, or `nil` when the scope and user do not agree or a name
    /// is invalid.
    private static func zone(_ scope: Scope, _ recordType: String, user: String?) -> ZoneID? {
        try? ZoneID(recordType, scope: scope, user: user)
    }

    /// What is wrong with a payload's record ids and token, or `nil`.
    private static func problem(recordIDs: [String], token: ChangeToken) -> String? {
        if token.generation < 0 || token.sequence < 0 { return "negative change token \(token)" }
        for id in recordIDs {
            if let problem = NameRules.problem(with: id) {
                return "invalid record id: it \(problem)"
            }
        }
        return nil
    }

    /// An integer from a decoded value: `Int`, another integer type, an `NSNumber`, or a
    /// whole `Double` (as some JSON transports produce).
    private static func integer(_ value: Any?) -> Int? {
        switch value {
        case let value as Int: return value
        case let value as Int64: return Int(exactly: value)
        case let value as Int32: return Int(value)
        case let value as UInt64: return Int(exactly: value)
        case let value as UInt32: return Int(value)
        case let value as Double: return Int(exactly: value)
        default: return nil
        }
    }

    /// An array of strings, from `[String]` or an array whose every element is a string.
    private static func strings(_ value: Any?) -> [String]? {
        if let strings = value as? [String] { return strings }
        guard let array = value as? [Any] else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(array.count)
        for element in array {
            guard let string = element as? String else { return nil }
            strings.append(string)
        }
        return strings
    }

    /// A short reason for a decoding failure.
    private static func reason(for error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .keyNotFound(let key, _): return "no \"\(key.stringValue)\" key"
        case .typeMismatch(_, let context), .valueNotFound(_, let context),
             .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
