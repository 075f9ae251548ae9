import Foundation
@testable import MagicMirror
import Testing

/// `AssetReferences`: the `"$asset"` objects of a record's fields, found at any depth, and
/// only those (a `$` elsewhere is text).
@Suite(.timeLimit(.minutes(5))) struct AssetReferencesTests {
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

    // MARK: A large commit, looked through in parallel parts

    private static func digest(_ index: Int) -> String {
        String(repeating: String(index % 10), count: 64)
    }

    /// A commit large enough to be looked through in parallel parts (one per core); the
    /// records at `references` refer to an asset, those at `invalid` to a path.
    private static func commit(references: [Int: Int] = [:], invalid: [Int] = []) -> [RecordOperation] {
        (0..<(ZoneState.operationsCheckedInParallel + 100)).map { index in
            let fields = if let asset = references[index] {
                "{\"file\":{\"$asset\":\"\(digest(asset))\",\"size\":1}}"
            } else if invalid.contains(index) {
                "{\"file\":{\"$asset\":\"../../etc/passwd\(index)\",\"size\":1}}"
            } else {
                "{\"n\":\(index)}"
            }
            return .save("r\(index)", fields: Data(fields.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000))
        }
    }

    @Test func theDigestsOfEveryPartAreCollected() throws {
        let operations = Self.commit(references: [0: 1, 10: 2, 4_000: 3, 4_195: 1])
        #expect(try AssetReferences.digests(in: operations) == [Self.digest(1), Self.digest(2), Self.digest(3)])
        #expect(try AssetReferences.digests(in: Self.commit()).isEmpty)
    }

    @Test(arguments: [[5], [4_150], [30, 4_150], [4_100, 4_150]])
    func theFirstInvalidReferenceInOrderIsReported(at invalid: [Int]) throws {
        do {
            _ = try AssetReferences.digests(in: Self.commit(references: [0: 1], invalid: invalid))
            Issue.record("an invalid reference was accepted")
        } catch {
            #expect(error.kind == .invalidRecord)
            #expect(error.recordIDs == ["r\(invalid[0])"])
            #expect(error.message.contains("passwd\(invalid[0])"))
        }
    }
}
