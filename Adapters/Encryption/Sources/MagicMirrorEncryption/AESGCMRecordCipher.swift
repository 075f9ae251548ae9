import Crypto
import Foundation
import MagicMirror

/// A `RecordCipher` that seals records with AES-256-GCM, with keys that only their user
/// holds.
///
/// Give it to a private mirror, and the mirror's records are stored sealed: the database,
/// its files and whoever runs its server see ciphertext (see the article "Encrypting
/// private records" in MagicMirror's documentation for what is protected and what is not).
///
/// Each value is sealed with a fresh random 96-bit nonce and a 128-bit tag, and the key id
/// stored next to it is authenticated too, so a value relabelled with another key id does
/// not open. Keep the keys where your user keeps secrets (a keychain, a password-derived
/// key); MagicMirror never stores them.
///
/// ## Rotating keys
///
/// A cipher seals with one key (``sealingKeyID``) and opens with it and the `olderKeys` it
/// was given. To rotate, make a cipher with a new key id and key, and the previous keys as
/// `olderKeys`: records sealed before still open, each is sealed with the new key when next
/// saved, and `Mirror.migrateStoredRecords()` seals the rest; then the older keys can go.
public struct AESGCMRecordCipher: RecordCipher {
    /// The id of the key new values are sealed with.
    public let sealingKeyID: String
    /// Every key the cipher holds, by id, the sealing key's included.
    private let keys: [String: Key]

    /// A key, shared between threads. `SymmetricKey` is not marked `Sendable` by
    /// swift-crypto 3, but it is an immutable value: its bytes are set when it is made and
    /// only read afterwards (by `AES.GCM`), so reading one key from several threads at once
    /// is safe.
    private struct Key: @unchecked Sendable {
        let key: SymmetricKey
    }

    /// Creates a cipher that seals with `key` and opens with it and `olderKeys`.
    ///
    /// ```swift
    /// let cipher = try AESGCMRecordCipher(keyID: "2026-11", key: SymmetricKey(size: .bits256))
    /// ```
    ///
    /// - Parameters:
    ///   - keyID: The id of `key`, stored beside every value it seals. Not secret; any
    ///     non-empty string, for example the month the key was made.
    ///   - key: A 256-bit key.
    ///   - olderKeys: Keys of earlier key ids it still opens, by key id.
    /// - Throws: `MirrorError.Kind.unsupported` for an empty key id, a key that is not 256
    ///   bits long, or another key under `keyID` in `olderKeys`.
    public init(keyID: String, key: SymmetricKey, olderKeys: [String: SymmetricKey] = [:]) throws {
        guard !keyID.isEmpty, !olderKeys.keys.contains(where: \.isEmpty) else {
            throw MirrorError(.unsupported, "an AES-GCM record cipher's key ids must not be empty")
        }
        for (id, candidate) in olderKeys.merging([keyID: key], uniquingKeysWith: { _, new in new })
        where candidate.bitCount != 256 {
            throw MirrorError(
                .unsupported,
                "key \(String(reflecting: id)) is \(candidate.bitCount) bits long; an AES-GCM record cipher takes "
                    + "256-bit keys (32 bytes)")
        }
        if let other = olderKeys[keyID], other != key {
            throw MirrorError(
                .unsupported,
                "olderKeys holds another key under the sealing key's id \(String(reflecting: keyID)); "
                    + "give each key its own id")
        }
        sealingKeyID = keyID
        keys = olderKeys.merging([keyID: key]) { _, new in new }.mapValues(Key.init)
    }

    /// Creates a cipher from raw key bytes, 32 per key.
    ///
    /// ```swift
    /// let cipher = try AESGCMRecordCipher(keyID: "2026-11", keyBytes: keyBytes)
    /// ```
    ///
    /// - Parameters:
    ///   - keyID: The id of the key, stored beside every value it seals.
    ///   - keyBytes: The 32 bytes of a 256-bit key.
    ///   - olderKeys: The bytes of keys of earlier key ids it still opens, by key id.
    /// - Throws: `MirrorError.Kind.unsupported` for an empty key id, a key that is not 32
    ///   bytes long, or other bytes under `keyID` in `olderKeys`.
    public init(keyID: String, keyBytes: Data, olderKeys: [String: Data] = [:]) throws {
        try self.init(
            keyID: keyID, key: SymmetricKey(data: keyBytes), olderKeys: olderKeys.mapValues { SymmetricKey(data: $0) })
    }

    /// Seals `plaintext` with the key ``sealingKeyID`` and a fresh random nonce.
    ///
    /// - Parameter plaintext: The bytes to seal.
    /// - Returns: The nonce, ciphertext and tag (AES-GCM's combined form) and the key id.
    /// - Throws: What AES-GCM throws (it does not for 256-bit keys).
    public func seal(_ plaintext: Data) throws -> SealedValue {
        let box = try AES.GCM.seal(plaintext, using: keys[sealingKeyID]!.key, authenticating: Data(sealingKeyID.utf8))
        // The combined form exists for the default 12-byte nonce.
        return SealedValue(keyID: sealingKeyID, ciphertext: box.combined!)
    }

    /// Opens a value sealed with one of the cipher's keys.
    ///
    /// - Parameter sealed: A value ``seal(_:)`` returned.
    /// - Returns: The plaintext.
    /// - Throws: `MirrorError.Kind.notFound` when the cipher holds no key `SealedValue.keyID`;
    ///   `MirrorError.Kind.decodingFailed` when the value does not authenticate (another key
    ///   under that id, or changed bytes).
    public func open(_ sealed: SealedValue) throws -> Data {
        guard let key = keys[sealed.keyID] else {
            throw MirrorError(
                .notFound,
                "this AES-GCM record cipher holds no key \(String(reflecting: sealed.keyID)) "
                    + "(it holds \(keys.keys.sorted().map { String(reflecting: $0) }.joined(separator: ", ")))")
        }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.ciphertext)
            return try AES.GCM.open(box, using: key.key, authenticating: Data(sealed.keyID.utf8))
        } catch {
            throw MirrorError(
                .decodingFailed,
                "the value sealed with key \(String(reflecting: sealed.keyID)) does not authenticate: another key "
                    + "under that id, or bytes that were changed",
                underlying: error)
        }
    }
}
