import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct SampleRecordTests {
    @Test func idsAreUniqueOverTenThousandMadeInATightLoop() {
        var ids = Set<String>()
        for _ in 0..<10_000 { ids.insert(SampleRecord().recordID) }
        #expect(ids.count == 10_000)
        let many = SampleRecord.many(10_000)
        #expect(Set(many.map(\.recordID)).count == 10_000)
    }

    @Test func itConformsInTheUsualWay() {
        let record = SampleRecord(title: "Milk", isDone: true, priority: 3, note: "2%")
        #expect(SampleRecord.recordType == "SampleRecord")
        #expect(record.recordID == record.id.uuidString)
        #expect(record.description.contains("\"Milk\""))
        let many = SampleRecord.many(3, titled: "Item")
        #expect(many.map(\.title) == ["Item 0", "Item 1", "Item 2"])
        #expect(many.map(\.priority) == [0, 1, 2])
        #expect(SampleRecord.many(-1).isEmpty)
    }

    @Test func itRoundTripsThroughTheDatabaseUnchanged() async throws {
        let database = InMemoryDatabase()
        let records = [
            SampleRecord(title: "Milk ✓ \"quoted\"", isDone: true, priority: -7, note: "line\nbreak"),
            SampleRecord(title: "", isDone: false, priority: Int.max, note: nil),
        ]
        for record in records { try await database.simulateSave(record) }
        #expect(Set(try database.records(SampleRecord.self)) == Set(records))
    }

    @Test func itsDefaultDateSurvivesEveryDateEncoding() throws {
        let record = SampleRecord()
        #expect(record.created.timeIntervalSince1970.rounded(.down) == record.created.timeIntervalSince1970)
        let strategies: [(JSONEncoder.DateEncodingStrategy, JSONDecoder.DateDecodingStrategy)] = [
            (.deferredToDate, .deferredToDate), (.iso8601, .iso8601),
            (.secondsSince1970, .secondsSince1970), (.millisecondsSince1970, .millisecondsSince1970),
        ]
        for (encoding, decoding) in strategies {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = encoding
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = decoding
            #expect(try decoder.decode(SampleRecord.self, from: encoder.encode(record)) == record)
        }
    }
}
