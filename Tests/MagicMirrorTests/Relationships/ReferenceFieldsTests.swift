import Foundation
@testable import MagicMirror
import Testing

/// Reading the targets of a stored reference field, which a cascade does for every record of
/// the referring zone.
@Suite(.timeLimit(.minutes(5))) struct ReferenceFieldsTests {
    private func targets(_ json: String, field: String = "parent", type: String = "Parent") -> [String] {
        ReferenceFields.targets(in: Data(json.utf8), field: field, targetType: type)
    }

    @Test func aToOneReferenceAndAnArrayOfThemGiveTheirIDsInOrder() {
        #expect(targets(#"{"parent":{"recordID":"p1","recordType":"Parent"},"title":"x"}"#) == ["p1"])
        #expect(targets(#"{"parent":[{"recordType":"Parent","recordID":"b"},{"recordID":"a","recordType":"Parent"}]}"#)
            == ["b", "a"])
        #expect(targets(#" { "title" : "x" , "parent" : [ ] } "#) == [])
        #expect(targets(#"{"parent":null}"#) == [])
        #expect(targets(#"{"title":"x"}"#) == [], "no such field")
    }

    @Test func whatIsNotAReferenceToTheTargetTypeIsLeftOut() {
        let json = #"{"parent":[{"recordID":"a","recordType":"Other"},{"recordID":"../x","recordType":"Parent"},"#
            + #"{"recordID":7,"recordType":"Parent"},{"recordType":"Parent"},1,"s",[{"recordID":"n","recordType":"Parent"}],"#
            + #"{"recordID":"ok","recordType":"Parent","extra":{"recordID":"no"}}]}"#
        #expect(targets(json) == ["ok"])
        // Only a top-level field counts.
        #expect(targets(#"{"inner":{"parent":{"recordID":"p","recordType":"Parent"}}}"#) == [])
    }

    @Test func escapedKeysAreReadAndTheLastOfARepeatedMemberWins() {
        #expect(targets(#"{"p\u0061rent":{"record\u0049D":"p\u0031","recordType":"Parent"}}"#) == ["p1"])
        // The last of a repeated member wins, whatever its kind.
        #expect(targets(#"{"parent":{"recordID":"a","recordType":"Parent"},"parent":{"recordID":"b","recordType":"Parent"}}"#)
            == ["b"])
        #expect(targets(#"{"parent":{"recordID":"a","recordID":null,"recordType":"Parent"}}"#) == [])
        #expect(targets(#"{"parent":{"recordID":1,"recordID":"c","recordType":"Parent"}}"#) == ["c"])
    }

    @Test func invalidJSONHasNoTargets() {
        for json in [
            #"{"parent":{"recordID":"a","recordType":"Parent"}"#,
            #"{"parent":{"recordID":"a","recordType":"Parent"},}"#,
            #"{"parent":[{"recordID":"a","recordType":"Parent"},]}"#,
            #"{"parent":{"recordID":"a","recordType":"Parent"}} x"#,
            #"{"parent":{"recordID":"a\q","recordType":"Parent"}}"#,
            #"[{"recordID":"a","recordType":"Parent"}]"#,
            "",
        ] {
            #expect(targets(json).isEmpty, "\(json)")
        }
    }
}
