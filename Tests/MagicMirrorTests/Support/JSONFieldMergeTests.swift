import Foundation
import MagicMirror
import Testing

@Suite(.timeLimit(.minutes(5))) struct JSONFieldMergeTests {
    private func merge(_ base: String?, _ local: String, _ remote: String, localIsLater: Bool = false) -> String? {
        JSONFieldMerge.merge(
            base: base.map { Data($0.utf8) }, local: Data(local.utf8), remote: Data(remote.utf8),
            localIsLater: localIsLater
        ).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func fieldsChangedOnOneSideKeepThatSide() {
        #expect(merge(#"{"a":1,"b":2,"c":3}"#, #"{"a":10,"b":2,"c":3}"#, #"{"a":1,"b":2,"c":30}"#)
            == #"{"a":10,"b":2,"c":30}"#)
    }

    @Test func aFieldChangedOnBothSidesGoesToTheLaterWriter() {
        let base = #"{"a":1,"b":2}"#
        #expect(merge(base, #"{"a":10,"b":2}"#, #"{"a":20,"b":2}"#, localIsLater: true) == #"{"a":10,"b":2}"#)
        #expect(merge(base, #"{"a":10,"b":2}"#, #"{"a":20,"b":2}"#, localIsLater: false) == #"{"a":20,"b":2}"#)
        // The same change on both sides is no conflict.
        #expect(merge(base, #"{"a":5,"b":2}"#, #"{"a":5,"b":2}"#) == #"{"a":5,"b":2}"#)
    }

    @Test func addedAndRemovedFieldsMerge() {
        // Local adds "n"; remote removes "b": both happen.
        #expect(merge(#"{"a":1,"b":2}"#, #"{"a":1,"b":2,"n":true}"#, #"{"a":1}"#) == #"{"a":1,"n":true}"#)
        // A field the local type does not know (written by a newer app) is kept.
        #expect(merge(#"{"a":1}"#, #"{"a":2}"#, #"{"a":1,"future":[1,{"x":null}]}"#)
            == #"{"a":2,"future":[1,{"x":null}]}"#)
    }

    @Test func valuesAreCopiedByteForByte() {
        let remote = #"{"date":7.3e+08,"nested":{"z":1,"a":"\"quoted\" \u00e9"},"s":"a\/b"}"#
        let merged = merge(#"{"date":7.3e+08,"nested":{"z":1,"a":"\"quoted\" \u00e9"},"s":"a\/b","x":1}"#,
                           #"{"date":7.3e+08,"nested":{"z":1,"a":"\"quoted\" \u00e9"},"s":"a\/b","x":2}"#,
                           remote + "")
        #expect(merged == #"{"date":7.3e+08,"nested":{"z":1,"a":"\"quoted\" \u00e9"},"s":"a\/b"}"#)
    }

    @Test func withoutABaseEveryDifferenceIsAConflict() {
        #expect(merge(nil, #"{"a":1,"b":2}"#, #"{"a":1,"b":3}"#, localIsLater: true) == #"{"a":1,"b":2}"#)
        #expect(merge(nil, #"{"a":1,"b":2}"#, #"{"a":1,"b":3}"#, localIsLater: false) == #"{"a":1,"b":3}"#)
    }

    @Test func escapedKeysAndWhitespaceAreUnderstood() {
        #expect(merge(" { \"k\\u0065y\" : 1 , \"b\" : [ 1 , 2 ] } ", #"{"key":2,"b":[1,2]}"#, #"{"key":1,"b":[3]}"#)
            == #"{"b":[3],"key":2}"#)
    }

    @Test func anythingButAnObjectIsRefused() {
        for bad in ["[1]", "1", #""s""#, "{", #"{"a":}"#, #"{"a":1,}"#, #"{"a":1} {"b":2}"#, #"{"a":tru}"#, #"{"a":"x}"#, ""] {
            #expect(JSONFieldMerge.members(of: Data(bad.utf8)) == nil, "\(bad)")
            #expect(merge(#"{"a":1}"#, bad, #"{"a":1}"#) == nil, "\(bad)")
        }
        #expect(JSONFieldMerge.members(of: Data("{}".utf8)) == [:])
    }

    /// Members are read as strictly as the database validates stored fields: what it
    /// would refuse to store is no object here either.
    @Test func invalidJSONInsideAnObjectIsRefused() {
        let bad = [
            #"{"a":01}"#, #"{"a":+1}"#, #"{"a":1.}"#, #"{"a":"\x"}"#, #"{"a":"\ud800"}"#,
            "{\"a\":\"\u{01}\"}", #"{"a":[1,]}"#, #"{"a\q":1}"#, #"{a:1}"#,
        ]
        for json in bad {
            #expect(JSONFieldMerge.members(of: Data(json.utf8)) == nil, "\(json)")
        }
        var invalidUTF8 = Data(#"{"a":""#.utf8)
        invalidUTF8.append(contentsOf: [0xC0, 0x80])
        invalidUTF8.append(contentsOf: Data(#""}"#.utf8))
        #expect(JSONFieldMerge.members(of: invalidUTF8) == nil)
    }

    @Test func membersKeepTheirTokensAndTheLastOfARepeatedKey() throws {
        let members = try #require(JSONFieldMerge.members(of: Data(#" {"k\u0065y" : [1, 2] ,"n":1,"n":2} "#.utf8)))
        #expect(members.keys.sorted() == ["key", "n"])
        #expect(members["key"]?.keyToken == Data(#""k\u0065y""#.utf8))
        #expect(members["key"]?.value == Data("[1, 2]".utf8))
        #expect(members["n"]?.value == Data("2".utf8))
        #expect(JSONFieldMerge.object(members) == Data(#"{"k\u0065y":[1, 2],"n":2}"#.utf8))
    }
}
