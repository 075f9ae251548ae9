import Testing

@testable import MagicMirror

/// `NameRules.problem(with:)`: what makes a name that becomes a path or a record id invalid,
/// each problem named, the first one found in a fixed order.
@Suite(.timeLimit(.minutes(5))) struct NameRulesTests {
    @Test func eachProblemIsNamed() {
        #expect(NameRules.problem(with: "") == "is empty")
        #expect(NameRules.problem(with: String(repeating: "x", count: 256))?.hasPrefix("is 256 bytes long") == true)
        #expect(NameRules.problem(with: ".") == "is '.', which names a directory")
        #expect(NameRules.problem(with: "..") == "is '..', which names a directory")
        #expect(NameRules.problem(with: "a/b") == "contains '/'")
        #expect(NameRules.problem(with: "a\u{0}b") == "contains a NUL byte")
        #expect(NameRules.problem(with: "e\u{301}", becomesFileName: true)?.hasPrefix("is not in Unicode") == true)
    }

    @Test func slashesAndNulBytesAreFoundAnywhere() {
        for length in 0..<40 {
            for place in 0...length {
                var bytes = [UInt8](repeating: UInt8(ascii: "r"), count: length)
                bytes.insert(UInt8(ascii: "/"), at: place)
                #expect(NameRules.problem(with: String(decoding: bytes, as: UTF8.self)) == "contains '/'")
                bytes[place] = 0
                #expect(NameRules.problem(with: String(decoding: bytes, as: UTF8.self)) == "contains a NUL byte")
            }
        }
        #expect(NameRules.problem(with: "a\u{0}/b") == "contains '/'", "a slash is reported before a NUL byte")
    }

    @Test func validNamesHaveNoProblem() {
        for name in ["a", "...", ".a", "record-1", "0F8FAD5B-D9CB-469F-A165-70867728950E", "\u{e9}t\u{e9}", "a b"] {
            #expect(NameRules.problem(with: name) == nil, "\(name)")
        }
        #expect(NameRules.problem(with: "e\u{301}") == nil, "a record id need not be precomposed")
    }
}
