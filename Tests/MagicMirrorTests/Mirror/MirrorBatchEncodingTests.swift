import Foundation
@testable import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// A mirror encodes each batch's values together (``BatchJSONCoding``): every record is
/// stored with its own fields, whether the direct encoder wrote them or declined and
/// `JSONEncoder` did, and a value that does not encode holds back only itself.
@Suite(.timeLimit(.minutes(5))) struct MirrorBatchEncodingTests {
    struct Tagged: Recordable {
        var id: String
        var tags: [String: Int]
        var score: Double
    }

    @Test func eachRecordOfABatchIsStoredWithItsOwnFields() async throws {
        let directory = try TemporaryDirectory("batch-encoding")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let mirror = try await Mirror<Tagged>(database: database)
        // More than one batch; some keys the direct encoder declines (not ASCII), one value
        // that does not encode at all (JSONEncoder throws for NaN).
        let records = (0..<1_200).map { index in
            Tagged(id: "r\(index)", tags: index % 7 == 0 ? ["é\(index)": index] : ["t": index], score: Double(index) / 4)
        }
        var withFailure = records
        withFailure[601].score = .nan
        mirror.dataModel.append(contentsOf: withFailure)
        await #expect(throws: (any Error).self) { try await mirror.flush() }
        // The flush throws when the failure is known: wait for the rest to be committed.
        try await mirror.waitUntilPendingChanges(timeout: .seconds(120)) { changes in
            changes.count == 1 && changes[0].isOnHold
        }
        let stored = try await database.fetchAll(in: .public(Tagged.recordType)).records
        let byID = Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0.fields) })
        #expect(byID.count == records.count - 1)
        #expect(byID["r601"] == nil)
        let encoder = StoredFieldsFormat.makeEncoder()
        var mismatches = 0
        for record in records where record.id != "r601" {
            if try byID[record.id] != encoder.encode(record) { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }
}
