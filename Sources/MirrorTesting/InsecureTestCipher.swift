import Foundation
import MagicMirror

/// A `RecordCipher` for tests, which is **not secure**: never use it to protect data.
///
/// It seals deterministically (the same plaintext and key always give the same bytes) with
/// a keystream and a tag derived from SHA-256 of the secret, so tests can check what a
/// mirror with a cipher stores, opens, rotates and refuses, without a cryptography library.
/// Anyone who reads its code can read what it sealed. Use `AESGCMRecordCipher` from the
/// `MagicMirrorEncryption` package in an app.
///
/// ```swift
/// let cipher = InsecureTestCipher(keyID: "2026", secret: "test secret")
/// let mirror = try await Mirror<SampleRecord>(
///     database: database, scope: .private, user: try MirrorUser(name: "ann"),
///     configuration: MirrorConfiguration(cipher: cipher))
/// ```
///
/// Like every cipher it fails to open a value sealed under a key id it does not hold, or
/// with another secret, or whose bytes were changed.
public struct InsecureTestCipher: RecordCipher {
    /// The id of the key it seals with.
    public let sealingKeyID: String
    /// Secrets by key id, the sealing key's included.
    private let secrets: [String: String]

    /// Creates a test cipher that seals with one key and opens with it and `olderKeys`.
    ///
    /// - Parameters:
    ///   - keyID: The id of the key it seals with.
    ///   - secret: That key's secret.
    ///   - olderKeys: Secrets of the keys it opens values with too, by key id (keys of
    ///     before a rotation).
    public init(keyID: String, secret: String, olderKeys: [String: String] = [:]) {
        sealingKeyID = keyID
        secrets = olderKeys.merging([keyID: secret]) { _, new in new }
    }

    /// Seals `plaintext` with the key ``sealingKeyID``: a 16-byte tag, then the bytes
    /// XOR a keystream; the same plaintext always gives the same bytes.
    ///
    /// - Parameter plaintext: The bytes to seal.
    /// - Returns: The sealed bytes and the key id.
    /// - Throws: Nothing; a cipher may.
    public func seal(_ plaintext: Data) throws -> SealedValue {
        let secret = secrets[sealingKeyID]!
        let tag = Self.tag(of: plaintext, secret: secret, keyID: sealingKeyID)
        return SealedValue(
            keyID: sealingKeyID, ciphertext: tag + Self.xor(plaintext, secret: secret, keyID: sealingKeyID))
    }

    /// Opens a value sealed with one of its keys.
    ///
    /// - Parameter sealed: A value ``seal(_:)`` returned.
    /// - Returns: The plaintext.
    /// - Throws: `MirrorError.Kind.notFound` for a key id it does not hold;
    ///   `MirrorError.Kind.decodingFailed` for a value that does not authenticate (another
    ///   secret, or changed bytes).
    public func open(_ sealed: SealedValue) throws -> Data {
        guard let secret = secrets[sealed.keyID] else {
            throw MirrorError(
                .notFound, "InsecureTestCipher holds no key \(String(reflecting: sealed.keyID)) "
                    + "(it holds \(secrets.keys.sorted()))")
        }
        let ciphertext = sealed.ciphertext
        guard ciphertext.count >= Self.tagSize else {
            throw MirrorError(.decodingFailed, "InsecureTestCipher: the sealed value is too short")
        }
        let plaintext = Self.xor(ciphertext.dropFirst(Self.tagSize), secret: secret, keyID: sealed.keyID)
        guard Self.tag(of: plaintext, secret: secret, keyID: sealed.keyID) == ciphertext.prefix(Self.tagSize) else {
            throw MirrorError(
                .decodingFailed, "InsecureTestCipher: the value sealed with key \(String(reflecting: sealed.keyID)) "
                    + "does not authenticate (another secret, or changed bytes)")
        }
        return plaintext
    }

    private static let tagSize = 16

    private static func tag(of plaintext: Data, secret: String, keyID: String) -> Data {
        Data(digest(Data("tag|\(secret)|\(keyID)|".utf8) + plaintext).prefix(tagSize))
    }

    /// `bytes` XOR a keystream of SHA-256 blocks of the secret, key id and block number.
    private static func xor(_ bytes: Data, secret: String, keyID: String) -> Data {
        var output = Data(capacity: bytes.count)
        var block: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if index % 32 == 0 { block = digest(Data("stream|\(secret)|\(keyID)|\(index / 32)".utf8)) }
            output.append(byte ^ block[index % 32])
        }
        return output
    }

    private static func digest(_ bytes: Data) -> [UInt8] {
        let hex = Array(SHA256.hex(of: bytes).utf8)
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }
}
