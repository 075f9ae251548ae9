import Foundation
import MagicMirror
import Testing

/// The transport forms of ``RemoteNotification``: `userInfo` and JSON.
@Suite(.timeLimit(.minutes(5))) struct RemoteNotificationTests {
    static let examples: [RemoteNotification] = [
        RemoteNotification(
            databaseIdentifier: "db-1", zone: .public("Todo"), recordIDs: ["a", "b"],
            reason: .created, token: ChangeToken(generation: 0, sequence: 2)),
        RemoteNotification(
            databaseIdentifier: "db-1", zone: .private("Note", user: "alice"), recordIDs: ["n1"],
            reason: .updated, token: ChangeToken(generation: 3, sequence: 41), writer: "w-9"),
        RemoteNotification(
            databaseIdentifier: "6F1C-ÅÄÖ", zone: .public("Über Type"), recordIDs: [],
            reason: .deleted, token: ChangeToken(generation: 1, sequence: 0), writer: "w/2"),
    ]

    private var example: RemoteNotification { Self.examples[1] }

    @Test(arguments: examples)
    func userInfoRoundTrips(notification: RemoteNotification) throws {
        let info = notification.userInfo
        #expect(RemoteNotification(userInfo: info) == notification)
        // Only property-list / JSON values: JSONSerialization accepts it as it is.
        #expect(JSONSerialization.isValidJSONObject(Self.stringKeyed(info)))
        #expect(PropertyListSerialization.propertyList(Self.stringKeyed(info), isValidFor: .binary))
        #expect(info["magicmirror"] as? Int == 1)
    }

    @Test(arguments: examples)
    func jsonRoundTrips(notification: RemoteNotification) throws {
        let data = try notification.jsonData()
        #expect(try RemoteNotification(jsonData: data) == notification)
        // The JSON form is the userInfo form: a payload that arrived as JSON and went through
        // JSONSerialization is read by init?(userInfo:), and the other way round.
        let parsed = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(RemoteNotification(userInfo: parsed) == notification)
        let fromUserInfo = try JSONSerialization.data(withJSONObject: Self.stringKeyed(notification.userInfo))
        #expect(try RemoteNotification(jsonData: fromUserInfo) == notification)
    }

    @Test func jsonFormIsFlat() throws {
        let text = String(decoding: try example.jsonData(), as: UTF8.self)
        #expect(text == #"{"database":"db-1","magicmirror":1,"reason":"updated","recordIDs":["n1"],"#
            + #""recordType":"Note","scope":"private","token":{"generation":3,"sequence":41},"#
            + #""user":"alice","writer":"w-9"}"#)
        let publicText = String(decoding: try Self.examples[0].jsonData(), as: UTF8.self)
        #expect(!publicText.contains("\"user\""))
        #expect(!publicText.contains("\"writer\""))
    }

    /// A notification nested in another Codable value uses the same flat form.
    @Test func codableUsesThePayloadForm() throws {
        struct Envelope: Codable, Equatable { var kind: String; var change: RemoteNotification }
        let envelope = Envelope(kind: "mirror", change: example)
        let data = try JSONEncoder().encode(envelope)
        #expect(try JSONDecoder().decode(Envelope.self, from: data) == envelope)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let change = try #require(object["change"] as? [String: Any])
        #expect(RemoteNotification(userInfo: change) == example)
    }

    @Test func foreignPayloadsAreNotRead() throws {
        let foreign: [[AnyHashable: Any]] = [
            [:],
            ["aps": ["alert": "Hello", "badge": 1]],
            ["ck": ["ce": 2, "cid": "iCloud.com.example"]],
            // Everything but the marker.
            example.userInfo.filter { $0.key != AnyHashable("magicmirror") },
        ]
        for payload in foreign {
            #expect(RemoteNotification(userInfo: payload) == nil)
        }
        for json in ["", "[]", "null", "42", "{\"aps\":{\"alert\":\"Hi\"}}", "{not json"] {
            let error = #expect(throws: MirrorError.self) { try RemoteNotification(jsonData: Data(json.utf8)) }
            #expect(error?.kind == .decodingFailed)
        }
    }

    /// Every way a payload can be broken gives nil (or a decodingFailed error), never a trap.
    @Test func malformedPayloadsAreRejected() throws {
        let valid = example.userInfo
        func changed(_ key: String, to value: Any?) -> [AnyHashable: Any] {
            var info = valid
            info[key] = value
            return info
        }
        let malformed: [(String, [AnyHashable: Any])] = [
            ("marker is text", changed("magicmirror", to: "yes")),
            ("marker is zero", changed("magicmirror", to: 0)),
            ("no database", changed("database", to: nil)),
            ("empty database", changed("database", to: "")),
            ("database is a number", changed("database", to: 7)),
            ("unknown scope", changed("scope", to: "shared-with-everyone")),
            ("private without user", changed("user", to: nil)),
            ("user is a number", changed("user", to: 12)),
            ("invalid user", changed("user", to: "../bob")),
            ("invalid record type", changed("recordType", to: "a/b")),
            ("empty record type", changed("recordType", to: "")),
            ("record ids not an array", changed("recordIDs", to: "n1")),
            ("record ids with a number", changed("recordIDs", to: ["n1", 2] as [Any])),
            ("invalid record id", changed("recordIDs", to: ["ok", ".."])),
            ("unknown reason", changed("reason", to: "exploded")),
            ("token is text", changed("token", to: "3:41")),
            ("token without sequence", changed("token", to: ["generation": 3])),
            ("negative token", changed("token", to: ["generation": 3, "sequence": -1])),
            ("fractional token", changed("token", to: ["generation": 3, "sequence": 4.5])),
            ("huge token", changed("token", to: ["generation": 3, "sequence": 1e300])),
            ("writer is a number", changed("writer", to: 5)),
        ]
        var publicWithUser = Self.examples[0].userInfo
        publicWithUser["user"] = "alice"
        for (label, payload) in malformed + [("public with user", publicWithUser)] {
            #expect(RemoteNotification(userInfo: payload) == nil, "\(label)")
            // The same payload as JSON, where JSON can hold it, is refused too.
            let keyed = Self.stringKeyed(payload)
            if JSONSerialization.isValidJSONObject(keyed) {
                let data = try JSONSerialization.data(withJSONObject: keyed)
                let error = #expect(throws: MirrorError.self, "\(label)") {
                    try RemoteNotification(jsonData: data)
                }
                #expect(error?.kind == .decodingFailed)
            }
        }
    }

    /// Values a transport may deliver instead of Swift's own types are still read.
    @Test func toleratesTransportTypes() throws {
        var info = example.userInfo
        info["magicmirror"] = NSNumber(value: 1)
        info["token"] = NSDictionary(dictionary: ["generation": NSNumber(value: 3), "sequence": 41.0])
        info["recordIDs"] = NSArray(array: ["n1"])
        info["future-key"] = ["anything": true]
        #expect(RemoteNotification(userInfo: info) == example)
        info["magicmirror"] = 2  // a later version that only added keys
        #expect(RemoteNotification(userInfo: info) == example)
    }

    /// One commit's records give one notification per reason, in the order the reasons
    /// first appear, each with its records' ids in order.
    @Test func groupingGivesOneNotificationPerReasonInOrder() {
        func record(_ id: String, version: Int, deleted: Bool = false) -> StoredRecord {
            StoredRecord(
                id: id, version: version, fields: deleted ? nil : Data("{}".utf8),
                modified: HLCTimestamp(millis: 5), writer: "w")
        }
        let token = ChangeToken(generation: 2, sequence: 7)
        let changed = [
            record("u1", version: 3), record("d1", version: 2, deleted: true), record("c1", version: 1),
            record("u2", version: 2), record("c2", version: 1), record("d2", version: 5, deleted: true),
        ]
        let grouped = RemoteNotification.grouping(
            changed, databaseIdentifier: "db", zone: .public("Todo"), token: token, writer: "w")
        #expect(grouped.map(\.reason) == [.updated, .deleted, .created])
        #expect(grouped.map(\.recordIDs) == [["u1", "u2"], ["d1", "d2"], ["c1", "c2"]])
        #expect(grouped.allSatisfy { $0.token == token && $0.writer == "w" && $0.databaseIdentifier == "db" })
        #expect(RemoteNotification.grouping(
            [], databaseIdentifier: "db", zone: .public("Todo"), token: token, writer: nil).isEmpty)
        let created = RemoteNotification.grouping(
            [record("c", version: 1)], databaseIdentifier: "db", zone: .public("Todo"), token: token, writer: nil)
        #expect(created.map(\.reason) == [.created])
        #expect(created.first?.writer == nil)
    }

    private static func stringKeyed(_ info: [AnyHashable: Any]) -> [String: Any] {
        var result: [String: Any] = [:]
        for (key, value) in info { if let key = key.base as? String { result[key] = value } }
        return result
    }
}
