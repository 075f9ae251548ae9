import Foundation
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import Testing

/// `/v1/records` pages a zone by keyset, one statement per page: a zone of several of
/// `RelayDatabase`'s pages opens whole and in agreement with its token, even when it changes
/// between pages, and a cursor the relay did not make is refused.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayPagingTests {
    private static func save(_ id: String, _ value: Int, base: Int = 0) -> RecordOperation {
        .save(id, fields: Data(#"{"v":\#(value)}"#.utf8), baseVersion: base, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    @Test func aZoneOfManyPagesOpensWholeThroughTheRelay() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("pager")
            let zone = ZoneID.private("Item", user: user)
            let client = relay.client(user)
            for start in stride(from: 0, to: 1_300, by: 260) {
                try await client.commit((start..<start + 260).map { Self.save(String(format: "r%04d", $0), $0) }, to: zone)
            }
            try await client.commit((0..<50).map { .delete(String(format: "r%04d", $0 * 7), baseVersion: 1, timestamp: HLCTimestamp(millis: 5_000, counter: 0)) }, to: zone)
            let all = try await client.fetchAll(in: zone)
            #expect(all.isComplete)
            #expect(all.records.count == 1_250)
            #expect(Set(all.records.map(\.id)).count == 1_250)
            #expect(all.token == (try await client.currentToken(in: zone)))

            // Pages of two, read by hand: each names where the next starts, and the pages
            // together are the zone.
            let token = try await RelayTestServer.token(user)
            var after: String?
            var ids: [String] = []
            var pages = 0
            repeat {
                let body = try JSONEncoder().encode(RelayWire.PageRequest(zone: zone, after: after, limit: 200))
                let answer = try await relay.send("/v1/records", body: body, token: token)
                try #require(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                let page = try JSONDecoder().decode(RelayWire.Page.self, from: answer.body)
                #expect(page.records.count <= 200)
                ids += page.records.map(\.id)
                after = page.next
                pages += 1
            } while after != nil && pages < 100
            #expect(pages >= 1_250 / 200)
            #expect(Set(ids) == Set(all.records.map(\.id)))
            #expect(ids.count == 1_250)
        }
    }

    @Test func aCursorTheRelayDidNotMakeIsRefused() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("pager")
            let zone = ZoneID.private("Item", user: user)
            try await relay.client(user).commit([Self.save("a", 1)], to: zone)
            let token = try await RelayTestServer.token(user)
            for cursor in ["a", "-1:a", "x:y", "", String(repeating: "9", count: 40) + ":a"] {
                let body = try JSONEncoder().encode(RelayWire.PageRequest(zone: zone, after: cursor, limit: 10))
                let answer = try await relay.send("/v1/records", body: body, token: token)
                let text = String(decoding: answer.body, as: UTF8.self)
                #expect(answer.status == 400, "\(cursor): \(text)")
                #expect(text.contains("is not a page's cursor"), "\(cursor): \(text)")
            }
        }
    }
}
