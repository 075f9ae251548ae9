import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// `InsecureTestCipher` keeps the promises of every `RecordCipher`: what it seals opens,
/// and a wrong secret, an unknown key id or changed bytes do not; it is deterministic.
@Suite(.timeLimit(.minutes(5))) struct InsecureTestCipherTests {
    static let plaintext = Data(#"{"id":"n1","title":"Zanzibar"}"#.utf8)

    @Test func sealedValuesOpenAndAreDeterministic() throws {
        let cipher = InsecureTestCipher(keyID: "k1", secret: "s1")
        let sealed = try cipher.seal(Self.plaintext)
        #expect(sealed.keyID == "k1")
        #expect(sealed.ciphertext.range(of: Data("Zanzibar".utf8)) == nil)
        #expect(try cipher.open(sealed) == Self.plaintext)
        #expect(try cipher.seal(Self.plaintext) == sealed)
        #expect(try InsecureTestCipher(keyID: "k2", secret: "s1").seal(Self.plaintext) != sealed)
    }

    @Test func aWrongSecretAnUnknownKeyOrChangedBytesDoNotOpen() throws {
        let sealed = try InsecureTestCipher(keyID: "k1", secret: "s1").seal(Self.plaintext)
        let wrong = #expect(throws: MirrorError.self) {
            try InsecureTestCipher(keyID: "k1", secret: "other").open(sealed)
        }
        #expect(wrong?.kind == .decodingFailed)
        let unknown = #expect(throws: MirrorError.self) {
            try InsecureTestCipher(keyID: "k2", secret: "s1").open(sealed)
        }
        #expect(unknown?.kind == .notFound)
        var changed = sealed
        changed.ciphertext[changed.ciphertext.startIndex + 20] ^= 1
        #expect(throws: MirrorError.self) { try InsecureTestCipher(keyID: "k1", secret: "s1").open(changed) }
        #expect(throws: MirrorError.self) {
            try InsecureTestCipher(keyID: "k1", secret: "s1").open(SealedValue(keyID: "k1", ciphertext: Data([1, 2])))
        }
    }

    @Test func aRotatedCipherOpensOlderKeysAndSealsWithTheNewOne() throws {
        let old = InsecureTestCipher(keyID: "k1", secret: "s1")
        let rotated = InsecureTestCipher(keyID: "k2", secret: "s2", olderKeys: ["k1": "s1"])
        #expect(try rotated.open(try old.seal(Self.plaintext)) == Self.plaintext)
        #expect(try rotated.seal(Self.plaintext).keyID == "k2")
        #expect(rotated.sealingKeyID == "k2")
        #expect(throws: MirrorError.self) { try old.open(try rotated.seal(Self.plaintext)) }
    }
}
