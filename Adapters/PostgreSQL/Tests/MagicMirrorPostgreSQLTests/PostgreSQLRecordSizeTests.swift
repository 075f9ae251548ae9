import Foundation
import MagicMirror
@testable import MagicMirrorPostgreSQL
import MirrorTestSupport
import Testing

/// A record over `PostgreSQLDatabase.maximumRecordSize` is refused before anything is sent,
/// with what to do instead, and nothing of its commit is stored (a 300 MB record took the
/// client to 2 GB on its way to the server).
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLRecordSizeTests {
    @Test func aRecordOverTheLimitIsRefusedWithItsCommitAndOneAtTheLimitIsNot() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let zone = ZoneID.public("Todo")
            func record(_ id: String, size: Int) -> RecordOperation {
                let text = String(repeating: "x", count: size - #"{"t":""}"#.utf8.count)
                return .save(id, fields: Data(#"{"t":"\#(text)"}"#.utf8), baseVersion: 0, timestamp: .testNow())
            }
            let limit = PostgreSQLDatabase.maximumRecordSize
            let refused = await #expect(throws: MirrorError.self) {
                try await database.commit([record("small", size: 100), record("large", size: limit + 1)], to: zone)
            }
            #expect(refused?.kind == .invalidRecord)
            #expect(refused?.recordIDs == ["large"])
            #expect(refused?.message.contains("asset") == true, "\(refused?.message ?? "")")
            #expect(try await database.fetchAll(in: zone).records.isEmpty, "nothing of the commit is stored")

            // At the limit: let through (checked without sending 64 MiB, which would load the
            // machine while the other tests of the suite run).
            #expect(throws: Never.self) {
                try PostgreSQLDatabase.refuseOversizedRecords([record("at-limit", size: limit)], in: zone)
            }
            let outcome = try await database.commit([record("small", size: 100)], to: zone)
            #expect(outcome.isApplied)
            #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["small"])
        }
    }
}
