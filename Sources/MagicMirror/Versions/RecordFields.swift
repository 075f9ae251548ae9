import Foundation

/// The stored fields of one record, as a migration sees them: the members of its JSON
/// object, by name.
///
/// A ``RecordMigration`` works on stored JSON, not on your Swift types, so that it keeps
/// working after the types change again. Read a field as any `Decodable` type and write one
/// from any `Encodable` value; fields you do not touch keep their stored bytes exactly.
///
/// For example, a migration that splits `name` into `first` and `last`:
///
/// ```swift
/// RecordMigration.transform { fields in
///     let name = try fields.value("name", as: String.self) ?? ""
///     let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
///     try fields.set("first", to: parts.first ?? "")
///     try fields.set("last", to: parts.count > 1 ? parts[1] : "")
///     fields.remove("name")
/// }
/// ```
public struct RecordFields: Sendable, Equatable {
    var members: [String: JSONFieldMerge.Member]

    init(members: [String: JSONFieldMerge.Member]) {
        self.members = members
    }

    /// The names of the fields, in sorted order.
    public var names: [String] { members.keys.sorted() }

    /// Whether the record has a field named `name` (even one whose value is `null`).
    ///
    /// - Parameter name: The field's name.
    /// - Returns: `true` when the field is stored.
    public func contains(_ name: String) -> Bool { members[name] != nil }

    /// The value of a field, decoded as `type`.
    ///
    /// - Parameters:
    ///   - name: The field's name.
    ///   - type: The type to decode the field's JSON value as, with the same strategies a
    ///     mirror uses (dates as seconds since 2001, data as Base64).
    /// - Returns: The value, or `nil` when the record has no such field.
    /// - Throws: ``MirrorError/Kind/decodingFailed`` when the stored value does not decode
    ///   as `type`.
    public func value<Value: Decodable>(_ name: String, as type: Value.Type) throws -> Value? {
        guard let member = members[name] else { return nil }
        do {
            return try StoredFieldsFormat.makeDecoder().decode(Value.self, from: member.value)
        } catch {
            throw MirrorError(
                .decodingFailed,
                "field \(String(reflecting: name)) does not decode as \(Value.self): \(error)", underlying: error)
        }
    }

    /// Sets a field to the JSON encoding of `value`, adding the field if needed.
    ///
    /// - Parameters:
    ///   - name: The field's name.
    ///   - value: The new value, encoded as a mirror encodes records.
    /// - Throws: ``MirrorError/Kind/encodingFailed`` when `value` cannot be encoded.
    public mutating func set<Value: Encodable>(_ name: String, to value: Value) throws {
        members[name] = try Self.member(name, encoding: value)
    }

    /// Removes a field; does nothing when there is none.
    ///
    /// - Parameter name: The field's name.
    public mutating func remove(_ name: String) { members[name] = nil }

    /// Gives a field another name, keeping its stored value; does nothing when there is no
    /// field named `name`. A field already named `newName` is replaced.
    ///
    /// - Parameters:
    ///   - name: The field's current name.
    ///   - newName: Its new name.
    public mutating func rename(_ name: String, to newName: String) {
        guard name != newName, let member = members.removeValue(forKey: name) else { return }
        members[newName] = JSONFieldMerge.Member(keyToken: Self.keyToken(newName), value: member.value)
    }

    // MARK: Internal

    /// The fields of a stored JSON object, or `nil` when `data` is not one.
    init?(json data: Data) {
        guard let members = JSONFieldMerge.members(of: data) else { return nil }
        self.members = members
    }

    /// The fields as one JSON object, keys sorted.
    var json: Data { JSONFieldMerge.object(members) }

    static func member<Value: Encodable>(_ name: String, encoding value: Value) throws -> JSONFieldMerge.Member {
        do {
            return JSONFieldMerge.Member(keyToken: keyToken(name), value: try StoredFieldsFormat.makeEncoder().encode(value))
        } catch {
            throw MirrorError(
                .encodingFailed, "a value for field \(String(reflecting: name)) could not be encoded: \(error)",
                underlying: error)
        }
    }

    /// A field name as a JSON string token, quotes included.
    static func keyToken(_ name: String) -> Data {
        var token: [UInt8] = []
        JSONByteWriter.appendQuoted(name, to: &token, asJSONEncoder: true)
        return Data(token)
    }
}
