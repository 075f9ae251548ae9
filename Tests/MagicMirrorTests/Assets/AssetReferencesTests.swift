import Foundation
@testable import MagicMirror
import Testing

/// `AssetReferences`: the `"$asset"` objects of a record's fields, found at any depth, and
/// only those (a `$` elsewhere is text).
@Suite struct AssetReferencesTests {
    private let digest = String(repeating: "ab", count: 32)

    private func digests(_ json: String) -> (Set<String>, String?) {
        var digests = Set<String>()
        let invalid = AssetReferences.collect(in: Data(json.utf8), into: &digests)
        return (digests, invalid)
    }

    @Test func aReferenceIsFoundAfterOtherDollarSigns() {
        let json = #"{"$price":"$5","note":"a $ and \"$asse\"","deep":[{"x":{"$asset":"\#(digest)","size":3}}]}"#
        #expect(digests(json).0 == [digest])
        #expect(digests(json).1 == nil)
    }

    @Test func aReferenceAtTheVeryStartOrEndOfTheBytesIsFound() {
        // The marker as the first key, and as the last bytes a value could end with.
        #expect(digests(#"{"$asset":"\#(digest)"}"#).0 == [digest])
        #expect(digests(#"{"a":{"$asset":"\#(digest)"}}"#).0 == [digest])
    }

    @Test(arguments: [#"{"price":"$5"}"#, #"{"$":1}"#, #"{"a":"$asset"}"#, "{}", #"{"x":"$"}"#, #"$"#])
    func fieldsWithoutAReferenceReferToNothing(json: String) {
        #expect(digests(json).0.isEmpty)
        #expect(digests(json).1 == nil)
    }

    @Test func aReferenceThatIsNotADigestIsReported() {
        #expect(digests(#"{"pad":"$$$$","file":{"$asset":"nope"}}"#).1 == #""nope""#)
    }
}
