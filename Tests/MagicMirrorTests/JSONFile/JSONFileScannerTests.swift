import Foundation
import MagicMirror
import Testing

/// The scanner that validates fields and reads journal lines: strict JSON, one object.
@Suite(.timeLimit(.minutes(5))) struct JSONFileScannerTests {
    static let valid: [String] = [
        "{}",
        " \n\t{ } \r\n",
        #"{"a":1}"#,
        #"{"a":[1,2,{"b":null}],"c":true,"d":false,"e":"x"}"#,
        #"{"n":-0.5e+10,"m":0,"o":1E3,"p":-12.25}"#,
        #"{"s":"\u00e9\ud83d\ude00\n\t\\\/\"\b\f\r"}"#,
        "{\"raw\":\"ünïcödé 🎉 中文\"}",
        #"{"nested":{"deeper":{"deepest":[[[]]]}}}"#,
        #"{"dup":1,"dup":2}"#,
    ]

    static let invalid: [String] = [
        "", " ", "[1]", "42", "\"text\"", "null",
        #"{"a":1,}"#, #"{'a':1}"#, #"{"a":01}"#, #"{"a":+1}"#, #"{"a":1.}"#, #"{"a":.5}"#,
        #"{"a":1e}"#, #"{"a":--1}"#, #"{"a":tru}"#, #"{"a"}"#, #"{"a":1"#, #"{,}"#, #"{"a":NaN}"#,
        #"{"a":1}x"#, #"{"a":1} {"b":2}"#, #"{"a":[1,]}"#, #"{"a":[1 2]}"#, #"{a:1}"#,
        #"{"a":"\q"}"#, #"{"a":"\u12"}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00"}"#,
        #"{"a":"\ud800\u0041"}"#, "{\"a\":\"tab\there\"}", "{\"a\":\"line\nbreak\"}",
        #"{"a":"unterminated}"#,
    ]

    @Test(arguments: valid)
    func acceptsStrictJSONObjects(text: String) throws {
        let data = Data(text.utf8)
        #expect(JSONShape.isObject(data))
        // JSONSerialization agrees.
        #expect((try? JSONSerialization.jsonObject(with: data)) is [String: Any])
    }

    @Test(arguments: invalid)
    func refusesAnythingElse(text: String) {
        #expect(!JSONShape.isObject(Data(text.utf8)))
    }

    @Test func refusesMalformedUTF8() {
        let samples: [[UInt8]] = [
            [0xC0, 0x80],  // overlong NUL
            [0xE0, 0x80, 0x80],  // overlong
            [0xED, 0xA0, 0x80],  // encoded surrogate
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xF5, 0x80, 0x80, 0x80],
            [0x80],  // lone continuation
            [0xE2, 0x82],  // truncated
        ]
        for bytes in samples {
            let data = Data(Array(#"{"a":""#.utf8) + bytes + Array(#""}"#.utf8))
            #expect(!JSONShape.isObject(data), "accepted \(bytes)")
        }
        #expect(JSONShape.isObject(Data(Array(#"{"a":""#.utf8) + [0xE2, 0x82, 0xAC] + Array(#""}"#.utf8))))
    }

    @Test func handlesDeepNestingWithoutRecursion() {
        let depth = 5_000
        let deep = String(repeating: #"{"a":["#, count: depth) + String(repeating: "]}", count: depth)
        #expect(JSONShape.isObject(Data(deep.utf8)))
        let unbalanced = String(repeating: #"{"a":["#, count: depth) + String(repeating: "]}", count: depth - 1)
        #expect(!JSONShape.isObject(Data(unbalanced.utf8)))
        let tooDeep = String(repeating: "[", count: 20_000)
        #expect(!JSONShape.isObject(Data(("{\"a\":" + tooDeep + String(repeating: "]", count: 20_000) + "}").utf8)))
    }
}
