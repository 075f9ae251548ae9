import Foundation
import MirrorTestSupport
import Synchronization
import Testing

@testable import MagicMirror

/// Decoding a large zone in parallel parts into one packed array of values
/// (`DecodedRecords`): every value lines up with its record.
@Suite(.timeLimit(.minutes(5))) struct PackedDecodingTests {

    struct Item: Codable, Equatable, Recordable {
        static let migrations: [RecordMigration] = [.add("n", default: -1)]
        var id: String
        var n: Int
        var note: String
    }

    /// A large zone (several parts) whose first part gives no value at all (tombstones and
    /// failed migrations), with values in later parts, records listed out of creation order
    /// and records decoded under another id: every value lines up with its record.
    @Test func packedDecodingLinesUpAcrossEmptyPartsAndFailedMigrations() throws {
        let coder = SchemaCoder<Item>()
        let count = BatchJSONCoding.recordsPerParallelPart * 3 + 5
        let records = (0..<count).map { index -> StoredRecord in
            let fields: Data? = switch index {
            case ..<(count / 3): index % 2 == 0 ? nil : Data("[1]".utf8)  // tombstone, migration fails
            case _ where index % 89 == 0: Data(#"{"id":"r\#(index)","note":7}"#.utf8)  // decoding fails
            case _ where index % 101 == 0: Data(#"{"id":"other\#(index)","note":"n\#(index)"}"#.utf8)
            default: Data(#"{"id":"r\#(index)","note":"\#(String(repeating: "n", count: 30))\#(index)"}"#.utf8)
            }
            return StoredRecord(
                id: "r\(index)", version: 1, fields: fields, modified: HLCTimestamp(millis: 1_000 + Int64(index)),
                writer: "w", created: HLCTimestamp(millis: 1_000 + Int64(index)))
        }
        let decoded = coder.decodeAll(records)
        #expect(decoded.count == count)
        for (position, result) in decoded.results.enumerated() {
            if position < count / 3 {
                if position % 2 == 0 {
                    #expect(result == nil, "\(position)")
                } else {
                    #expect(throws: StoredRecordProblem.self, "\(position)") { try result?.get() }
                }
            } else if position % 89 == 0 {
                #expect(throws: StoredRecordProblem.self, "\(position)") { try result?.get() }
            } else {
                let value = try #require(try result?.get(), "\(position)")
                let id = position % 101 == 0 ? "other\(position)" : "r\(position)"
                #expect(value.id == id && value.n == -1 && value.note.hasSuffix("\(position)"), "\(position)")
            }
        }

        // Loaded in order and reversed: the same records shown, in creation order.
        for listed in [records, records.reversed()] {
            var set = ChangeSet(records: Array(listed), token: ChangeToken(generation: 1, sequence: 1), isComplete: true)
            var packed = coder.decodeAll(listed)
            var engine = SyncEngine<Item>(
                zone: .public("Item"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
            engine.load(&set, decoded: &packed)
            let expected = (count / 3..<count).filter { $0 % 89 != 0 }
                .map { $0 % 101 == 0 ? "other\($0)" : "r\($0)" }
            #expect(engine.records.array.map(\.id) == expected)
            for id in expected.prefix(50) { #expect(engine.records[id]?.note.hasSuffix(id.drop { !$0.isNumber }) == true) }
            #expect(engine.reportedUndecodable.count == (count / 3) / 2 + (count / 3..<count).filter { $0 % 89 == 0 }.count)
        }
    }
}
