import Foundation

/// Seals the fields of private records with keys only their user holds, and opens them again.
///
/// Give a cipher to a private mirror (``MirrorConfiguration/cipher``) and every record it
/// saves is stored sealed: the database, its files and whoever runs its server see
/// ciphertext. The mirror opens each stored record before it migrates, decodes or merges it,
/// so conflicts are still merged field by field and stored fields your type does not know
/// are still kept. See <doc:EncryptingPrivateRecords> for what is protected and what is not.
///
/// MagicMirror has no dependencies and ships no cipher of its own; the
/// `MagicMirrorEncryption` package (in `Adapters/Encryption`) offers an AES-GCM one, and
/// MirrorTesting an insecure one for tests.
///
/// ## Keys and rotation
///
/// Every sealed value carries the id of the key that sealed it (``SealedValue/keyID``).
/// A cipher seals with one key, ``sealingKeyID``, and opens values sealed with any key it
/// still holds. To rotate, make a cipher that seals with the new key and still opens with
/// the old ones: records stored before the rotation keep opening, each one is sealed with the
/// new key the next time it is saved, and `Mirror.migrateStoredRecords()` seals the rest
/// with it, after which the old keys can go.
///
/// ## What every implementation must guarantee
///
/// - ``open(_:)`` returns exactly the bytes ``seal(_:)`` was given, for every value sealed
///   with a key the cipher holds.
/// - ``open(_:)`` throws, and never returns other bytes, for a value sealed with a key it
///   does not hold, under another key id, or whose bytes were changed (authenticated
///   encryption).
/// - ``seal(_:)`` returns a value whose ``SealedValue/keyID`` is ``sealingKeyID``.
/// - Methods may be called from any thread, at once.
public protocol RecordCipher: Sendable {
    /// The id of the key ``seal(_:)`` seals with.
    ///
    /// A mirror compares it with the key id of stored records to find those that
    /// `Mirror.migrateStoredRecords()` should seal again.
    var sealingKeyID: String { get }

    /// Seals plaintext with the key ``sealingKeyID``.
    ///
    /// - Parameter plaintext: The fields of one record, as a JSON object.
    /// - Returns: The ciphertext and the id of the key that sealed it.
    /// - Throws: Any error; the mirror keeps the change pending and reports it
    ///   (``MirrorError/Kind/encodingFailed``).
    func seal(_ plaintext: Data) throws -> SealedValue

    /// Opens a value sealed with one of the cipher's keys.
    ///
    /// - Parameter sealed: A value ``seal(_:)`` returned, as it was stored.
    /// - Returns: The plaintext it was sealed from.
    /// - Throws: Any error when the cipher does not hold the key ``SealedValue/keyID`` or
    ///   the value does not authenticate; the mirror reports the record
    ///   (``MirrorError/Kind/decodingFailed``) and leaves it untouched.
    func open(_ sealed: SealedValue) throws -> Data
}

/// A sealed record's ciphertext and the id of the key that sealed it.
public struct SealedValue: Hashable, Sendable {
    /// The id of the key that sealed ``ciphertext``.
    public var keyID: String
    /// The sealed bytes, whatever the cipher needs to open them (nonce, tag and so on).
    public var ciphertext: Data

    /// Creates a sealed value.
    ///
    /// - Parameters:
    ///   - keyID: The id of the key that sealed `ciphertext`.
    ///   - ciphertext: The sealed bytes.
    public init(keyID: String, ciphertext: Data) {
        self.keyID = keyID
        self.ciphertext = ciphertext
    }
}
