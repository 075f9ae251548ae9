import Foundation
import MagicMirror
import Testing

@Suite(.timeLimit(.minutes(5))) struct JSONByteWriterTests {
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
}
