import Foundation

/// The stored form of sealed fields, and a mirror's side of its ``RecordCipher``.
///
/// A sealed record's stored fields are one JSON object, keys sorted:
///
/// ```
/// {"$assets":[{"$asset":"<digest>"}],"$key":"<key id>","$schemaVersion":2,"$sealed":"<base64>"}
/// ```
///
/// - `"$sealed"`: the cipher's ciphertext of the record's complete fields (every top-level
///   field, the id field and `"$schemaVersion"` included), Base64.
/// - `"$key"`: the id of the key that sealed it.
/// - `"$schemaVersion"`: a copy of the sealed schema version, present when it is above 1, so
///   that a mirror can find records to migrate without opening them. The sealed one counts.
/// - `"$assets"`: a copy of every asset reference in the sealed fields, present when there
///   is one, so that the database still checks that they are stored and never removes them
///   as unreferenced (see ``Asset``).
///
/// Fields without a `"$sealed"` member are open: written before the mirror had a cipher, or
/// by a mirror without one. They are read as they are, and sealed when next saved.
struct FieldSealer: Sendable {
    let cipher: any RecordCipher

    static let sealedKey = "$sealed"
    static let keyIDKey = "$key"
    static let assetsKey = "$assets"

    /// Seals open fields into their stored form.
    ///
    /// - Throws: What the cipher throws.
    func seal(_ fields: Data) throws -> Data {
        let sealed = try cipher.seal(fields)
        var members: [String: JSONFieldMerge.Member] = [:]
        members[Self.sealedKey] = Self.member(Self.sealedKey, string: sealed.ciphertext.base64EncodedString())
        members[Self.keyIDKey] = Self.member(Self.keyIDKey, string: sealed.keyID)
        let version = SchemaVersionField.version(of: fields)
        if version > 1 {
            members[SchemaVersionField.key] = JSONFieldMerge.Member(
                keyToken: SchemaVersionField.keyToken, value: Data("\(version)".utf8))
        }
        var digests = Set<String>()
        let invalid = AssetReferences.collect(in: fields, into: &digests)
        // An invalid reference is copied too, so that the database refuses it as it would
        // refuse the open fields.
        var references = digests.sorted()
        if let invalid { references.append(invalid) }
        if !references.isEmpty {
            var list = Data("[".utf8)
            for (index, digest) in references.enumerated() {
                if index > 0 { list.append(UInt8(ascii: ",")) }
                list.append(Data("{".utf8) + RecordFields.keyToken(Asset.digestKey) + Data(":".utf8))
                list.append(RecordFields.keyToken(digest))
                list.append(UInt8(ascii: "}"))
            }
            list.append(UInt8(ascii: "]"))
            members[Self.assetsKey] = JSONFieldMerge.Member(keyToken: RecordFields.keyToken(Self.assetsKey), value: list)
        }
        return JSONFieldMerge.object(members)
    }

    /// Opens stored fields: the plaintext of sealed ones, open ones as they are.
    ///
    /// - Throws: A ``SealProblem`` when the fields are sealed and the cipher cannot open
    ///   them, or their envelope is malformed.
    func open(_ fields: Data) throws -> Data {
        guard let sealed = try Self.sealedValue(in: fields) else { return fields }
        do {
            return try cipher.open(sealed)
        } catch {
            throw SealProblem(
                reason: "it is sealed with key \(String(reflecting: sealed.keyID)), which the mirror's cipher "
                    + "cannot open (a key it does not hold, or bytes that were changed): \(error)",
                underlying: error)
        }
    }

    /// Whether stored fields are sealed with another key than the one the cipher seals with,
    /// or not sealed at all.
    func isOutdated(_ fields: Data) -> Bool {
        do {
            guard let sealed = try Self.sealedValue(in: fields) else { return true }
            return sealed.keyID != cipher.sealingKeyID
        } catch {
            return false
        }
    }

    /// The sealed value of stored fields, or `nil` for open fields.
    ///
    /// Sealed fields are written with sorted keys, so they start with `{"$assets":` or
    /// `{"$key":`: open fields are told apart without parsing them.
    ///
    /// - Throws: A ``SealProblem`` when fields that look sealed are not a well-formed
    ///   sealed record.
    static func sealedValue(in fields: Data) throws -> SealedValue? {
        guard fields.starts(with: keyIDPrefix) || fields.starts(with: assetsPrefix),
              let members = JSONFieldMerge.members(of: fields), let sealedMember = members[sealedKey]
        else { return nil }
        guard let keyID = members[keyIDKey].flatMap({ string($0.value) }),
              let ciphertext = string(sealedMember.value).flatMap({ Data(base64Encoded: $0) })
        else {
            throw SealProblem(
                reason: "its fields are not a well-formed sealed record "
                    + "(\"\(sealedKey)\": Base64, \"\(keyIDKey)\": a key id)",
                underlying: nil)
        }
        return SealedValue(keyID: keyID, ciphertext: ciphertext)
    }

    private static let keyIDPrefix = Data("{\"\(keyIDKey)\":".utf8)
    private static let assetsPrefix = Data("{\"\(assetsKey)\":".utf8)

    private static func member(_ name: String, string: String) -> JSONFieldMerge.Member {
        JSONFieldMerge.Member(keyToken: RecordFields.keyToken(name), value: RecordFields.keyToken(string))
    }

    private static func string(_ json: Data) -> String? {
        try? StoredFieldsFormat.makeDecoder().decode(String.self, from: json)
    }
}

/// Why stored fields could not be opened.
struct SealProblem: Error, CustomStringConvertible {
    var reason: String
    /// The cipher's error, if it threw one.
    var underlying: (any Error)?

    var description: String { reason }
}
