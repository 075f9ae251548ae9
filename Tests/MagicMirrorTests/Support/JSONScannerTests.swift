import Foundation
import Testing

@testable import MagicMirror

/// `JSONScanner.scanString`, which reads plain content eight bytes at a time: every byte that
/// ends or escapes a string, or makes it invalid, must be seen wherever it lies in a word.
@Suite(.timeLimit(.minutes(5))) struct JSONScannerTests {
    /// Scans `content` between quotes, followed by `tail`.
    private func scan(_ content: [UInt8], tail: [UInt8] = []) -> (start: Int, end: Int, escaped: Bool, position: Int)? {
        let bytes = [UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")] + tail
        return bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(base: buffer.baseAddress!, count: buffer.count)
            guard let found = scanner.scanString() else { return nil }
            return (found.start, found.end, found.escaped, scanner.position)
        }
    }

    private func plain(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) } }

    @Test func aPlainStringEndsAtItsClosingQuoteWhateverItsLength() throws {
        for length in 0...40 {
            let found = try #require(scan(plain(length), tail: Array(#"x": "y""#.utf8)))
            #expect(found.start == 1 && found.end == 1 + length && !found.escaped, "length \(length)")
            #expect(found.position == length + 2)
        }
    }

    @Test func aQuoteEndsTheStringAtEveryPlaceInAWord() throws {
        for offset in 0..<24 {
            let found = try #require(scan(plain(offset), tail: plain(20) + [UInt8(ascii: "\"")]))
            #expect(found.end == 1 + offset, "quote at \(offset)")
            #expect(found.position == offset + 2)
        }
    }

    @Test func anEscapeIsSeenAtEveryPlaceInAWord() throws {
        for offset in 0..<24 {
            let content = plain(offset) + Array(#"\"\\\u00e9"#.utf8) + plain(17)
            let found = try #require(scan(content), "escape at \(offset)")
            #expect(found.escaped)
            #expect(found.end == 1 + content.count, "the escaped quote does not end it")
        }
    }

    @Test func aControlByteMakesTheStringInvalidAtEveryPlaceInAWord() {
        for offset in 0..<24 {
            for control: UInt8 in [0x00, 0x0A, 0x1F] {
                #expect(scan(plain(offset) + [control] + plain(17)) == nil, "byte \(control) at \(offset)")
            }
        }
        #expect(scan(plain(8) + [0x20] + plain(8)) != nil, "a space is content")
        #expect(scan(plain(8) + [0x7F] + plain(8)) != nil, "DEL is content")
    }

    @Test func multiByteUTF8IsValidatedAtEveryPlaceInAWord() throws {
        for offset in 0..<24 {
            let accented = plain(offset) + Array("é€😀".utf8) + plain(13)
            let found = try #require(scan(accented), "UTF-8 at \(offset)")
            #expect(found.end == 1 + accented.count)
            #expect(scan(plain(offset) + [0xC3] + plain(13)) == nil, "a truncated sequence at \(offset)")
            #expect(scan(plain(offset) + [0xFF] + plain(13)) == nil, "an invalid byte at \(offset)")
        }
    }

    @Test func anUnterminatedStringIsInvalid() {
        for length in 0...20 {
            let bytes = [UInt8(ascii: "\"")] + plain(length)
            let found = bytes.withUnsafeBufferPointer { buffer in
                var scanner = JSONScanner(base: buffer.baseAddress!, count: buffer.count)
                return scanner.scanString() != nil
            }
            #expect(!found, "length \(length)")
        }
    }

    @Test func theWordTestFlagsExactlyTheBytesThatNeedALook() {
        for byte in UInt8.min...UInt8.max {
            let special = byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
            for place in 0..<8 {
                var word = UInt64(0x6161_6161_6161_6161)
                word &= ~(UInt64(0xFF) << (8 * place))
                word |= UInt64(byte) << (8 * place)
                #expect(JSONScanner.needsALook(word) == special, "byte \(byte) at \(place)")
            }
        }
    }
}
