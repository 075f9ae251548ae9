import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Opening a mirror over more records than one decoding part (decoded in parallel, straight
/// from the stored bytes): records of an older schema version are migrated, fields the type
/// does not know are kept on save, and a record that does not decode is reported alone.
@Suite(.timeLimit(.minutes(5))) struct LargeOpenDecodingTests {
    static let zone = ZoneID.public("Gadget")

    struct Gadget: Recordable {
        static var recordType: String { "Gadget" }
        static let migrations: [RecordMigration] = [.rename("label", to: "name")]
        var id: String
        var name: String
        var weight: Double
        var made: Date
    }

    @Test func aLargeZoneOpensMigratedWithUnknownFieldsKept() async throws {
        let database = InMemoryDatabase()
        let count = BatchJSONCoding.recordsPerParallelPart * 2 + 31
        let bad = count / 2
        for index in 0..<count {
            let json: String
            if index == bad {
                json = #"{"id":"g\#(index)","label":"broken","weight":"heavy","made":0}"#
            } else if index % 2 == 0 {
                // Version 1, before the rename, with a field only a newer app knows.
                json = #"{"colour":{"r":1,"g":[2,3]},"id":"g\#(index)","label":"g\#(index)","made":\#(index).5,"weight":\#(index)}"#
            } else {
                json = #"{"$schemaVersion":2,"id":"g\#(index)","made":\#(index).5,"name":"g\#(index)","shelf":"A\#(index)","weight":1e-3}"#
            }
            try await database.simulateSave(id: "g\(index)", fields: Data(json.utf8), in: Self.zone)
        }
        let mirror = try await Mirror<Gadget>(database: database)
        #expect(mirror.dataModel.count == count - 1)
        let byID = Dictionary(uniqueKeysWithValues: mirror.dataModel.map { ($0.id, $0) })
        for index in 0..<count where index != bad {
            let gadget = try #require(byID["g\(index)"])
            #expect(gadget.name == "g\(index)")
            #expect(gadget.weight == (index % 2 == 0 ? Double(index) : 1e-3))
            #expect(gadget.made == Date(timeIntervalSinceReferenceDate: Double(index) + 0.5))
        }
        #expect(mirror.lastError?.recordIDs == ["g\(bad)"])
        #expect(mirror.lastError?.kind == .decodingFailed)

        let even = try #require(mirror.dataModel.firstIndex { $0.id == "g2" })
        let odd = try #require(mirror.dataModel.firstIndex { $0.id == "g3" })
        mirror.dataModel[even].weight = 7
        mirror.dataModel[odd].weight = 8
        try await mirror.flush()
        let stored = try await database.fetch(["g2", "g3"], in: Self.zone)
        var objects: [String: [String: Any]] = [:]
        for record in stored {
            objects[record.id] = try JSONSerialization.jsonObject(with: #require(record.fields)) as? [String: Any]
        }
        #expect((objects["g2"]?["colour"] as? [String: Any])?["r"] as? Int == 1)
        #expect(objects["g2"]?["label"] == nil && objects["g2"]?["name"] as? String == "g2")
        #expect(objects["g2"]?["weight"] as? Int == 7)
        #expect(objects["g3"]?["shelf"] as? String == "A3")
    }
}
