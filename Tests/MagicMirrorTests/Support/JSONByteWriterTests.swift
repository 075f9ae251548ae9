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
}
