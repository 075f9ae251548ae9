import Foundation
@testable import MagicMirror
import Testing

@Suite(.timeLimit(.minutes(5))) struct SHA256Tests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func knownDigests(message: String, digest: String) {
        #expect(SHA256.hex(of: Array(message.utf8)) == digest)
    }

    @Test func aMillionAsInPiecesOfEverySize() {
        let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        var hash = SHA256()
        var offset = 0
        var piece = 1
        bytes.withUnsafeBytes { raw in
            while offset < bytes.count {
                let end = min(offset + piece, bytes.count)
                hash.update(UnsafeRawBufferPointer(rebasing: raw[offset..<end]))
                offset = end
                piece = piece % 200 + 1
            }
        }
        #expect(hash.finish() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func everyPaddingLengthMatchesOneShot() {
        // Lengths around the 56- and 64-byte boundaries, fed in one piece or two.
        for length in 50...130 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            var split = SHA256()
            bytes.withUnsafeBytes { raw in
                split.update(UnsafeRawBufferPointer(rebasing: raw[0..<(length / 3)]))
                split.update(UnsafeRawBufferPointer(rebasing: raw[(length / 3)...]))
            }
            #expect(split.finish() == SHA256.hex(of: bytes), "length \(length)")
        }
    }
}
