import Foundation
@testable import MagicMirror
import Testing

/// The intent file of a linked commit, written as ``DirectJSONEncoder`` writes its zone lines.
@Suite(.timeLimit(.minutes(5))) struct JSONFileLinkedIntentTests {
    @Test func anIntentReadsBackAsItWasWritten() throws {
        let books = ZoneID.public("Book")
        let chapters = ZoneID.public("Chapter")
        let clock = HLCTimestamp(millis: 1_763_703_120_123, counter: 2)
        let produced = [
            StoredRecord(id: "b1", version: 2, fields: nil, modified: clock, writer: "w1"),
            StoredRecord(id: "b2", version: 1, fields: Data(#"{"title":"a/b"}"#.utf8), modified: clock, writer: "w1"),
        ]
        let changes = [
            LinkedChange.delete("c1"),
            LinkedChange(recordID: "c2", deletes: false, nullifications: [
                LinkedChange.Nullification(field: "a/b é \"q\"", targetType: "Book", targetIDs: ["b1", "b3"]),
            ]),
        ]
        let intent = JSONFileLinkedIntent(writer: "w1", timestamp: clock, batches: [
            LinkedBatch(zone: books, produced: produced, changes: [], writer: "w1", timestamp: clock),
            LinkedBatch(zone: chapters, produced: [], changes: changes, writer: "w1", timestamp: clock),
        ])
        let bytes = try intent.encoded()
        let read = try #require(JSONFileLinkedIntent.decode(bytes, space: books.spaceKey))
        #expect(read.writer == "w1" && read.timestamp == clock)
        #expect(read.batches.map(\.zone) == [books, chapters])
        #expect(read.batches.map(\.produced) == [produced, []])
        #expect(read.batches.map(\.changes) == [[], changes])
        // One line per part: header, zone line, its two records, zone line, end.
        #expect(bytes.split(separator: UInt8(ascii: "\n")).count == 6)
    }
}
