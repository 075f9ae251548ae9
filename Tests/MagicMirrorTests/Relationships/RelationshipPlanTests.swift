import Foundation
@testable import MagicMirror
import Testing

/// The planner both databases use: which records the rules delete or change, and when they
/// refuse a commit.
@Suite(.timeLimit(.minutes(5))) struct RelationshipPlanTests {
    static let rules = [
        StoredDeleteRule(referringType: "Book", field: "author", cardinality: .one, targetType: "Author", action: .cascade),
        StoredDeleteRule(referringType: "Book", field: "editor", cardinality: .optional, targetType: "Author", action: .nullify),
        StoredDeleteRule(referringType: "Book", field: "reviewers", cardinality: .many, targetType: "Author", action: .nullify),
        StoredDeleteRule(referringType: "Chapter", field: "book", cardinality: .one, targetType: "Book", action: .cascade),
        StoredDeleteRule(referringType: "Award", field: "winner", cardinality: .one, targetType: "Author", action: .deny),
    ]

    static func ref(_ type: String, _ id: String) -> String { #"{"recordType":"\#(type)","recordID":"\#(id)"}"# }

    static func record(_ id: String, _ json: String) -> StoredRecord {
        StoredRecord(id: id, version: 1, fields: Data(json.utf8), modified: HLCTimestamp(millis: 1, counter: 0), writer: "w")
    }

    static func tombstone(_ id: String) -> StoredRecord {
        StoredRecord(id: id, version: 2, fields: nil, modified: HLCTimestamp(millis: 2, counter: 0), writer: "w")
    }

    let zones: [String: [StoredRecord]] = [
        "Author": [record("ann", #"{"name":"Ann"}"#), record("eve", #"{"name":"Eve"}"#)],
        "Book": [
            record("b1", #"{"author":\#(ref("Author", "ann")),"editor":\#(ref("Author", "eve")),"reviewers":[]}"#),
            record("b2", #"{"author":\#(ref("Author", "eve")),"editor":\#(ref("Author", "ann")),"reviewers":[\#(ref("Author", "ann")),\#(ref("Author", "eve"))]}"#),
            // Hostile: a reference to a type that does not exist, an id that is not a name,
            // a field that is not a reference at all.
            record("b3", #"{"author":\#(ref("Nope", "ann")),"editor":\#(ref("Author", "a/b")),"reviewers":"ann"}"#),
        ],
        "Chapter": [record("c1", #"{"book":\#(ref("Book", "b1"))}"#), record("c2", #"{"book":\#(ref("Book", "b2"))}"#)],
        "Award": [],
    ]

    func plan(deleting ids: [String], awards: [StoredRecord] = []) -> RelationshipPlan {
        var zones = self.zones
        zones["Award"] = awards
        return RelationshipPlan(ids.map(Self.tombstone), type: "Author", rules: Self.rules, scope: .public) {
            zones[$0] ?? []
        }
    }

    @Test func cascadesRecursivelyAndNullifiesTheRest() throws {
        guard case .apply(let changes) = plan(deleting: ["ann"]) else {
            Issue.record("refused")
            return
        }
        #expect(changes["Book"]?.filter(\.deletes).map(\.recordID) == ["b1"])
        #expect(changes["Chapter"]?.map(\.recordID) == ["c1"])
        let nullified = try #require(changes["Book"]?.first { !$0.deletes })
        #expect(nullified.recordID == "b2")
        #expect(Set(nullified.nullifications.map(\.field)) == ["editor", "reviewers"])
        #expect(changes["Author"] == nil)
    }

    @Test func hostileFieldsAreNeitherFollowedNorChanged() {
        guard case .apply(let changes) = plan(deleting: ["ann", "eve"]) else {
            Issue.record("refused")
            return
        }
        #expect(!(changes["Book"] ?? []).contains { $0.recordID == "b3" })
    }

    @Test func aDenyRuleRefusesTheWholeCommitNamingTheDeniedRecords() {
        let award = Self.record("prize", #"{"winner":\#(Self.ref("Author", "eve"))}"#)
        guard case .refuse(let error) = plan(deleting: ["ann", "eve"], awards: [award]) else {
            Issue.record("not refused")
            return
        }
        #expect(error.kind == .refused)
        #expect(error.recordIDs == ["eve"])
        #expect(error.nothingStored)
        #expect(error.message.contains("Award prize"))
    }

    @Test func aDenyByARecordDeletedInTheSameCommitDoesNotRefuse() {
        // The award refers to a book deleted by the cascade: no reason to deny.
        let rules = Self.rules + [
            StoredDeleteRule(referringType: "Chapter", field: "mentor", cardinality: .optional, targetType: "Author", action: .deny),
        ]
        let zones = ["Book": [Self.record("b1", #"{"author":\#(Self.ref("Author", "ann"))}"#)],
                     "Chapter": [Self.record("c1", #"{"book":\#(Self.ref("Book", "b1")),"mentor":\#(Self.ref("Author", "ann"))}"#)]]
        let plan = RelationshipPlan([Self.tombstone("ann")], type: "Author", rules: rules, scope: .public) { zones[$0] ?? [] }
        guard case .apply(let changes) = plan else {
            Issue.record("refused")
            return
        }
        #expect(changes["Chapter"]?.map(\.recordID) == ["c1"])
    }

    @Test func reachableTypesFollowCascadesOnly() {
        #expect(RelationshipPlan.reachableTypes(from: "Author", rules: Self.rules) == ["Author", "Award", "Book", "Chapter"])
        #expect(RelationshipPlan.reachableTypes(from: "Book", rules: Self.rules) == ["Book", "Chapter"])
        #expect(RelationshipPlan.reachableTypes(from: "Chapter", rules: Self.rules) == ["Chapter"])
    }

    @Test func linkedChangesAreRecognisedOnceApplied() {
        let book = zones["Book"]!.first { $0.id == "b2" }!
        let timestamp = HLCTimestamp(millis: 9, counter: 0)
        let change = LinkedChange(recordID: "b2", deletes: false, nullifications: [
            .init(field: "reviewers", targetType: "Author", targetIDs: ["ann"]),
            .init(field: "editor", targetType: "Author", targetIDs: ["ann"]),
        ])
        let produced = LinkedChange.records(applying: [change], stored: { $0 == "b2" ? book : nil }, writer: "me", timestamp: timestamp)
        #expect(produced.count == 1)
        let data = produced.first?.fields ?? Data()
        let fields = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        #expect(fields?["editor"] is NSNull)
        #expect((fields?["reviewers"] as? [[String: String]])?.map { $0["recordID"] } == ["eve"])
        #expect(produced.first?.version == 2)
        // Applying it again over its own result changes nothing.
        let again = LinkedChange.records(applying: [change], stored: { _ in produced.first }, writer: "me", timestamp: timestamp)
        #expect(again.isEmpty)
    }

    @Test func nullifyingAFieldThatCannotBeNullIsRefused() {
        let rule = StoredDeleteRule(referringType: "Book", field: "author", cardinality: .one, targetType: "Author", action: .nullify)
        #expect(throws: MirrorError.self) { try rule.validate() }
        #expect(throws: MirrorError.self) {
            try DeleteRuleSet.check([Self.rules[0], Self.rules[0]], referringType: "Book")
        }
    }
}
