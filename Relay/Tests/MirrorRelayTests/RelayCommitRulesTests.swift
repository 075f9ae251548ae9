import Foundation
import MagicMirror
import MagicMirrorRelay
import Testing

/// What the relay refuses in a commit that PostgreSQL's rules alone would store.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayCommitRulesTests {
    /// A timestamp far ahead of the clocks would win every merge for as long as it is ahead:
    /// the relay refuses the operation (naming it, nothing stored), and stores one a little
    /// ahead (a device's clock a minute fast).
    @Test func aTimestampFarAheadOfTheClockIsRefused() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("clock")
            let zone = ZoneID.private("Item", user: user)
            let client = relay.client(user)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let far = HLCTimestamp(millis: now + 3_600_000, counter: 0)
            do {
                try await client.commit(
                    [.save("future", fields: Data(#"{"v":1}"#.utf8), baseVersion: 0, timestamp: far),
                     .save("present", fields: Data(#"{"v":2}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: now, counter: 0))],
                    to: zone)
                Issue.record("a timestamp an hour ahead was stored")
            } catch let error as MirrorError {
                #expect(error.kind == .invalidRecord)
                #expect(error.recordIDs == ["future"])
                #expect(error.message.contains("ahead of the relay's clock"), "\(error.message)")
            }
            #expect(try await client.fetchAll(in: zone).records.isEmpty)
            let slightlyFast = HLCTimestamp(millis: now + 60_000, counter: 0)
            try await client.commit([.save("fast", fields: Data(#"{"v":3}"#.utf8), baseVersion: 0, timestamp: slightlyFast)], to: zone)
            #expect(try await client.fetchAll(in: zone).records.map(\.id) == ["fast"])
        }
    }
}
