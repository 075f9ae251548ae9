import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct InMemoryDatabaseTests {
    @Test func writersShareRecordsButNotWriterIDs() async throws {
        let database = InMemoryDatabase(identifier: "shared")
        let other = database.writer(named: "process-b")
        #expect(other.identifier == "shared")
        #expect(other.writerID == "process-b")
        #expect(database.writerID != other.writerID)
        let fields = Data(#"{"title":"x"}"#.utf8)
        try await other.commit(
            [.save("r1", fields: fields, baseVersion: 0, timestamp: HLCTimestamp(millis: 1))],
            to: .public("Todo"))
        let seen = try await database.fetch(["r1"], in: .public("Todo"))
        #expect(seen.map(\.writer) == ["process-b"])
    }
}
