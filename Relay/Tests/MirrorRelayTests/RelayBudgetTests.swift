import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import Synchronization
import Testing

/// The relay holds at most `--max-inflight-bytes` of request bodies at once: past it a
/// request is answered 503 with `Retry-After` and stores nothing, until the bodies held are
/// answered; a body larger than the whole budget is a 413.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayBudgetTests {
    static let budget = 1024 * 1024
    static let arguments = ["--max-inflight-bytes", "\(budget)"]
    static let zone = ZoneID.public("Todo")

    /// One record `id` whose one field is `padding` bytes long.
    static func save(_ id: String, padding: Int) -> RecordOperation {
        .save(
            id, fields: Data("{\"v\":\"\(String(repeating: "x", count: padding))\"}".utf8), baseVersion: 0,
            timestamp: HLCTimestamp(millis: 1_000, counter: 0))
    }

    /// A `/v1/token` request padded with spaces to about `bytes`: it stores nothing.
    static func tokenRequest(bytes: Int) -> Data {
        Data(("{\"zone\":{\"scope\":\"public\",\"recordType\":\"Todo\"}}" + String(repeating: " ", count: bytes)).utf8)
    }

    /// Sends a token request of about 300 KB; its status, error code and `Retry-After`.
    static func probe(_ relay: RunningRelay, token: String) async throws -> (status: Int, code: String?, retryAfter: String?) {
        var request = URLRequest(url: relay.url.appendingPathComponent("v1/token"))
        request.httpMethod = "POST"
        request.httpBody = tokenRequest(bytes: 300_000)
        request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        return (http?.statusCode ?? 0, RelayHostileInputTests.code(body), http?.value(forHTTPHeaderField: "Retry-After"))
    }

    /// Sends probes until one is answered `status`, for at most a minute.
    static func probe(
        _ relay: RunningRelay, token: String, until status: Int
    ) async throws -> (status: Int, code: String?, retryAfter: String?) {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let answer = try await probe(relay, token: token)
            if answer.status == status || ContinuousClock.now > deadline { return answer }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func aBodyLargerThanTheBudgetIsRefusedAndStoresNothing() async throws {
        try await RunningRelay.with(extraArguments: Self.arguments) { relay in
            let subject = RelayTestServer.uniqueName("user")
            let error = try await #require(throws: MirrorError.self) {
                try await relay.client(subject).commit([Self.save("big", padding: Self.budget + 1)], to: Self.zone)
            }
            #expect(error.kind == .invalidRecord, "\(error)")
            #expect(error.message.contains("larger than \(Self.budget) bytes"), "\(error.message)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }

    @Test func bodiesPastTheBudgetAreAnswered503UntilTheBodiesHeldAreAnswered() async throws {
        try await RunningRelay.with(extraArguments: Self.arguments) { relay in
            let subject = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(subject)
            let client = relay.client(subject)
            // A commit whose body arrives a byte a second holds 900,000 bytes of the budget
            // from its head on: a slow client, not a stalled one (the relay closes a
            // connection idle for 15 s).
            let held = try #require(RawConnection(port: relay.url.port ?? 0))
            #expect(held.write(
                "POST /v1/commit HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(token)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n{"))
            let sending = Mutex(true)
            let (ended, end) = AsyncStream<Never>.makeStream()
            let trickle = Thread {
                while sending.withLock({ $0 }), held.write(" ") { Thread.sleep(forTimeInterval: 1) }
                end.finish()
            }
            trickle.start()
            defer { sending.withLock { $0 = false } }

            let busy = try await Self.probe(relay, token: token, until: 503)
            #expect(busy.status == 503)
            #expect(busy.code == "unavailable")
            #expect(busy.retryAfter == "1")
            // An app's commit meanwhile: a transient error that stored nothing.
            let error = try await #require(throws: MirrorError.self) {
                try await client.commit([Self.save("waiting", padding: 300_000)], to: Self.zone)
            }
            #expect(error.kind.isTransient, "\(error)")
            #expect(error.nothingStored, "\(error)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])

            // The held commit's client goes away: its bytes are the budget's again.
            sending.withLock { $0 = false }
            for await _ in ended {}
            held.disconnect()
            let free = try await Self.probe(relay, token: token, until: 200)
            #expect(free.status == 200)
            try await client.commit([Self.save("waiting", padding: 300_000)], to: Self.zone)
            #expect(try await relay.admin("SELECT id FROM magicmirror.records") == ["waiting"])
        }
    }
}
