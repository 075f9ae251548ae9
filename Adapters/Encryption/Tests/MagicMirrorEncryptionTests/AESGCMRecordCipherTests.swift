import Crypto
import Foundation
import MagicMirror
import MagicMirrorEncryption
import MirrorTesting
import Testing

/// `AESGCMRecordCipher` alone (round trips, a known answer, tampering, wrong keys, rotation,
/// refused keys) and behind a `Mirror` on a JSON-file database.
@Suite(.timeLimit(.minutes(5))) struct AESGCMRecordCipherTests {
    static let keyBytes = Data((0..<32).map { UInt8($0) })
    static let otherKeyBytes = Data((0..<32).map { UInt8(255 - $0) })
    static let plaintext = Data(#"{"id":"n1","title":"Zanzibar"}"#.utf8)

    @Test func sealedValuesOpenAndHideThePlaintext() throws {
        let cipher = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes)
        let sealed = try cipher.seal(Self.plaintext)
        #expect(sealed.keyID == "k1")
        #expect(sealed.ciphertext.count == Self.plaintext.count + 28, "a 12-byte nonce and a 16-byte tag")
        #expect(sealed.ciphertext.range(of: Data("Zanzibar".utf8)) == nil)
        #expect(try cipher.open(sealed) == Self.plaintext)
        // The stored form is AES-GCM's combined one (nonce, ciphertext, tag), with the key id
        // as associated data: any AES-GCM implementation opens it.
        let box = try AES.GCM.SealedBox(combined: sealed.ciphertext)
        #expect(try AES.GCM.open(box, using: SymmetricKey(data: Self.keyBytes), authenticating: Data("k1".utf8))
            == Self.plaintext)
        // A fresh nonce each time: equal records do not look equal.
        #expect(try cipher.seal(Self.plaintext) != sealed)
    }

    @Test func aValueSealedByAnotherImplementationOpens() throws {
        // AES-256-GCM of the plaintext with this nonce, key and associated data (the key id),
        // sealed here by swift-crypto's own API as another implementation would.
        let nonce = try AES.GCM.Nonce(data: Data(repeating: 7, count: 12))
        let box = try AES.GCM.seal(
            Self.plaintext, using: SymmetricKey(data: Self.keyBytes), nonce: nonce, authenticating: Data("k1".utf8))
        let cipher = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes)
        #expect(try cipher.open(SealedValue(keyID: "k1", ciphertext: try #require(box.combined))) == Self.plaintext)
    }

    @Test func theAESGCMTestVectorOfNISTOpens() throws {
        // NIST GCM test case 14 (McGrew and Viega): a 256-bit zero key, a zero nonce, one
        // zero block, no associated data; checked with swift-crypto, whose `open` the cipher
        // calls with the key id as associated data.
        let key = SymmetricKey(data: Data(count: 32))
        let combined = Data(hex: "000000000000000000000000" + "cea7403d4d606b6e074ec5d3baf39d18"
            + "d0d1c8a799996bf0265b98b5d48ab919")
        let box = try AES.GCM.SealedBox(combined: combined)
        #expect(try AES.GCM.open(box, using: key) == Data(count: 16))
        // The cipher authenticates the key id: the same bytes do not open under it.
        let cipher = try AESGCMRecordCipher(keyID: "k1", key: key)
        expectError(.decodingFailed) { _ = try cipher.open(SealedValue(keyID: "k1", ciphertext: combined)) }
    }

    @Test func changedBytesAndAnotherKeyIDDoNotOpen() throws {
        let only = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes)
        let sealed = try only.seal(Self.plaintext)
        for index in [0, 12, sealed.ciphertext.count / 2, sealed.ciphertext.count - 1] {
            var changed = sealed
            changed.ciphertext[changed.ciphertext.startIndex + index] ^= 0x01
            expectError(.decodingFailed) { _ = try only.open(changed) }
        }
        var truncated = sealed
        truncated.ciphertext = sealed.ciphertext.prefix(20)
        expectError(.decodingFailed) { _ = try only.open(truncated) }
        // The same key under another id: the key id is authenticated.
        let relabelling = try AESGCMRecordCipher(keyID: "k2", keyBytes: Self.keyBytes, olderKeys: ["k1": Self.keyBytes])
        expectError(.decodingFailed) {
            _ = try relabelling.open(SealedValue(keyID: "k2", ciphertext: sealed.ciphertext))
        }
    }

    @Test func aWrongKeyOrAnUnknownKeyIDDoesNotOpen() throws {
        let sealed = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes).seal(Self.plaintext)
        let wrong = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.otherKeyBytes)
        expectError(.decodingFailed) { _ = try wrong.open(sealed) }
        let unknown = try AESGCMRecordCipher(keyID: "k2", keyBytes: Self.keyBytes)
        expectError(.notFound) { _ = try unknown.open(sealed) }
    }

    @Test func aRotatedCipherOpensOldKeysAndSealsWithTheNewOne() throws {
        let old = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes)
        let sealedBefore = try old.seal(Self.plaintext)
        let rotated = try AESGCMRecordCipher(keyID: "k2", keyBytes: Self.otherKeyBytes, olderKeys: ["k1": Self.keyBytes])
        #expect(rotated.sealingKeyID == "k2")
        #expect(try rotated.open(sealedBefore) == Self.plaintext)
        let sealedAfter = try rotated.seal(Self.plaintext)
        #expect(sealedAfter.keyID == "k2")
        expectError(.notFound) { _ = try old.open(sealedAfter) }
    }

    @Test func badKeysAreRefused() throws {
        expectError(.unsupported) { _ = try AESGCMRecordCipher(keyID: "k1", keyBytes: Data(count: 16)) }
        expectError(.unsupported) { _ = try AESGCMRecordCipher(keyID: "", keyBytes: Self.keyBytes) }
        expectError(.unsupported) {
            _ = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes, olderKeys: ["k0": Data(count: 31)])
        }
        expectError(.unsupported) {
            _ = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes, olderKeys: ["k1": Self.otherKeyBytes])
        }
        _ = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes, olderKeys: ["k1": Self.keyBytes])
    }

    struct Secret: Recordable, Equatable {
        var id: String
        var text: String
    }

    @Test func aMirrorStoresOnlyCiphertextInItsFiles() async throws {
        let database = try TemporaryDatabase(name: "aes-gcm")
        defer { try? database.remove() }
        let cipher = try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.keyBytes)
        let configuration = MirrorConfiguration(cipher: cipher)
        let mirror = try await Mirror<Secret>(
            database: database.database, scope: .private, user: try MirrorUser(name: "ann"), configuration: configuration)
        mirror.dataModel.append(Secret(id: "s1", text: "Zanzibar-8812"))
        try await mirror.flush()

        let walker = try #require(FileManager.default.enumerator(at: database.directory, includingPropertiesForKeys: nil))
        var files = 0
        while let url = walker.nextObject() as? URL {
            guard let bytes = try? Data(contentsOf: url) else { continue }
            files += 1
            #expect(bytes.range(of: Data("Zanzibar".utf8)) == nil, "\(url.path)")
        }
        #expect(files > 0)
        let reopened = try await Mirror<Secret>(
            database: try JSONFileDatabase(directory: database.directory), scope: .private, user: try MirrorUser(name: "ann"),
            configuration: configuration)
        #expect(reopened.dataModel.array == [Secret(id: "s1", text: "Zanzibar-8812")])
        let wrong = try await Mirror<Secret>(
            database: try JSONFileDatabase(directory: database.directory), scope: .private, user: try MirrorUser(name: "ann"),
            configuration: MirrorConfiguration(cipher: try AESGCMRecordCipher(keyID: "k1", keyBytes: Self.otherKeyBytes)))
        #expect(wrong.dataModel.isEmpty)
    }
}

/// Expects `body` to throw a ``MirrorError`` of `kind`.
func expectError(
    _ kind: MirrorError.Kind, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    let error = #expect(throws: MirrorError.self, sourceLocation: sourceLocation, performing: body)
    #expect(error?.kind == kind, "\(String(describing: error))", sourceLocation: sourceLocation)
}

extension Data {
    /// The bytes of a hexadecimal string.
    init(hex: String) {
        let digits = Array(hex.utf8)
        self.init(stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)!
        })
    }
}
