import Foundation
import MagicMirror
import Testing

@Suite struct JSONByteWriterTests {
    private let text = "a/b \"q\" \\ \u{8}\u{c}\n\r\t\u{1}\u{1f} é😀"

    @Test func journalStringsKeepSlashesAndWriteOtherControlsAsUnicodeEscapes() {
        var writer = JSONByteWriter()
        writer.append(string: text)
        #expect(String(decoding: writer.bytes, as: UTF8.self)
                == #""a/b \"q\" \\ \u0008\u000c\n\r\t\u0001\u001f é😀""#)
    }

    @Test func aRepeatedStringIsWrittenAsEachTimeAndAnotherOneAsItself() {
        var writer = JSONByteWriter()
        for string in [text, text, "w\"1", "w\"1", text] {
            writer.append(repeatedString: string)
            writer.append(byte: UInt8(ascii: ","))
        }
        var expected = JSONByteWriter()
        for string in [text, text, "w\"1", "w\"1", text] {
            expected.append(string: string)
            expected.append(byte: UInt8(ascii: ","))
        }
        #expect(writer.bytes == expected.bytes)
    }

    @Test func jsonEncoderStyleEscapesSlashesAndUsesShortForms() throws {
        var bytes: [UInt8] = []
        JSONByteWriter.appendQuoted(text, to: &bytes, asJSONEncoder: true)
        #expect(String(decoding: bytes, as: UTF8.self)
                == #""a\/b \"q\" \\ \b\f\n\r\t\u0001\u001f é😀""#)
        // JSONEncoder itself writes that (on the platforms DirectJSONEncoder stands in on).
        if DirectJSONEncoder.standsInOnThisPlatform {
            let encoded = try JSONEncoder().encode([text])
            #expect(String(decoding: encoded, as: UTF8.self) == "[" + String(decoding: bytes, as: UTF8.self) + "]")
        }
    }

    /// Plain bytes are skipped eight at a time: a byte to escape is found at every position
    /// of a word, after any number of plain words, in both styles.
    @Test(arguments: ["\"", "\\", "/", "\n", "\u{1}", "\u{8}", "\u{1f}", "é", "😀"])
    func aByteToEscapeIsFoundAtEveryPosition(special: String) throws {
        let journal: [String: String] = [
            "\"": #"\""#, "\\": #"\\"#, "/": "/", "\n": #"\n"#, "\u{1}": #"\u0001"#, "\u{8}": #"\u0008"#,
            "\u{1f}": #"\u001f"#, "é": "é", "😀": "😀",
        ]
        let encoder: [String: String] = ["/": #"\/"#, "\u{8}": #"\b"#]
        for before in 0..<20 {
            for after in [0, 1, 7, 8, 9, 17] {
                let text = String(repeating: "x", count: before) + special + String(repeating: "y", count: after)
                var writer = JSONByteWriter()
                writer.append(string: text)
                let expected = String(repeating: "x", count: before) + journal[special]!
                    + String(repeating: "y", count: after)
                #expect(String(decoding: writer.bytes, as: UTF8.self) == "\"" + expected + "\"")
                var bytes: [UInt8] = []
                JSONByteWriter.appendQuoted(text, to: &bytes, asJSONEncoder: true)
                let expectedAsEncoder = String(repeating: "x", count: before) + (encoder[special] ?? journal[special]!)
                    + String(repeating: "y", count: after)
                #expect(String(decoding: bytes, as: UTF8.self) == "\"" + expectedAsEncoder + "\"")
                if DirectJSONEncoder.standsInOnThisPlatform {
                    let encoded = try JSONEncoder().encode([text])
                    #expect(String(decoding: encoded, as: UTF8.self) == "[" + String(decoding: bytes, as: UTF8.self) + "]")
                }
            }
        }
    }

    /// Room for megabytes is backed by huge pages where the system has them: advice that
    /// must change no byte, whether the room is reserved empty or after bytes were written,
    /// and whether the bytes are copied out small or large.
    @Test(arguments: [0, 1_000, 1 << 20])
    func largeRoomAndItsDataKeepEveryByte(writtenFirst: Int) {
        var writer = JSONByteWriter(capacity: 16)
        let pattern = (0..<writtenFirst).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        writer.bytes.append(contentsOf: pattern)
        writer.reserveCapacity(writtenFirst + (9 << 20))
        #expect(writer.bytes.capacity >= writtenFirst + (9 << 20))
        #expect(writer.bytes == pattern)
        writer.bytes.append(contentsOf: [UInt8](repeating: UInt8(ascii: "z"), count: 9 << 20))
        writer.append("}")
        let data = writer.data()
        #expect(data.count == writtenFirst + (9 << 20) + 1)
        #expect(data == Data(writer.bytes))

        var small = JSONByteWriter()
        small.append("{}")
        #expect(small.data() == Data("{}".utf8))
    }
}
