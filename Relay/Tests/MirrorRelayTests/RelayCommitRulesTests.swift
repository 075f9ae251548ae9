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

    /// A timestamp before 1970 (no clock of MagicMirror's makes one; it would lose every
    /// merge) is refused, naming the operation, with nothing stored.
    @Test func aTimestampBefore1970IsRefused() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("clock")
            let token = try await RelayTestServer.token(user)
            let body = RelayOneStatementCommitTests.body(
                #"{"scope":"public","recordType":"Item"}"#, "past", fields: #"{"v":1}"#, timestamp: "-5-0")
            let answer = try await relay.send("/v1/commit", body: body, token: token, headers: ["Content-Type": "application/json"])
            #expect(answer.status == 400, "\(String(decoding: answer.body, as: UTF8.self))")
            #expect(String(decoding: answer.body, as: UTF8.self).contains("before 1970"))
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }

    /// Fields that refer to an asset and hold a `\u0000`, which the server's JSON (jsonb)
    /// refuses when it looks for the assets: the client's record is wrong, a 400 with
    /// nothing stored, never a 503 that tells the client to send it again.
    @Test func fieldsTheServerCannotParseForAssetsAreTheClientsError() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("nul")
            let token = try await RelayTestServer.token(user)
            let digest = String(repeating: "ab", count: 32)
            let body = RelayOneStatementCommitTests.body(
                #"{"scope":"public","recordType":"Item"}"#, "nul",
                fields: #"{"image":{"$asset":"\#(digest)"},"text":"a\u0000b"}"#)
            let answer = try await relay.send("/v1/commit", body: body, token: token, headers: ["Content-Type": "application/json"])
            #expect(answer.status == 400, "\(String(decoding: answer.body, as: UTF8.self))")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }
}
