import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import Synchronization
import Testing

/// The relay holds at most `--max-inflight-bytes` of request bodies at once, half of it for
/// one user, counted as bytes arrive: past it a request is answered 503 with `Retry-After`
/// and stores nothing, until the bodies held are answered; a body over a user's half is a
/// 413; a small body always passes; a body sent too slowly is a 408.
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

    /// Sends a token request of about `bytes`; its status, error code and `Retry-After`.
    static func probe(
        _ relay: RunningRelay, token: String, bytes: Int = 300_000
    ) async throws -> (status: Int, code: String?, retryAfter: String?) {
        var request = URLRequest(url: relay.url.appendingPathComponent("v1/token"))
        request.httpMethod = "POST"
        request.httpBody = tokenRequest(bytes: bytes)
        request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        return (http?.statusCode ?? 0, RelayHostileInputTests.code(body), http?.value(forHTTPHeaderField: "Retry-After"))
    }

    /// Sends probes until one is answered `status`, for at most a minute.
    static func probe(
        _ relay: RunningRelay, token: String, bytes: Int = 300_000, until status: Int
    ) async throws -> (status: Int, code: String?, retryAfter: String?) {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let answer = try await probe(relay, token: token, bytes: bytes)
            if answer.status == status || ContinuousClock.now > deadline { return answer }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// A commit whose head declares `declared` bytes, of which `sent` are sent at once and
    /// then one a second (a slow client, not a stalled one: the relay closes a connection
    /// idle for 15 s) until ``stop()``.
    final class HeldBody: Sendable {
        let connection: RawConnection
        private let sending = Mutex(true)
        private let ended: AsyncStream<Never>

        init(_ relay: RunningRelay, token: String, declared: Int, sent: Int) throws {
            connection = try #require(RawConnection(port: relay.url.port ?? 0))
            #expect(connection.write(
                "POST /v1/commit HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(token)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(declared)\r\n\r\n{"
                    + String(repeating: " ", count: sent - 1)))
            let (ended, end) = AsyncStream<Never>.makeStream()
            self.ended = ended
            Thread.detachNewThread { [self] in
                while sending.withLock({ $0 }), connection.write(" ") { Thread.sleep(forTimeInterval: 1) }
                end.finish()
            }
        }

        /// Stops sending and closes the connection.
        func stop() async {
            sending.withLock { $0 = false }
            for await _ in ended {}
            connection.disconnect()
        }
    }

    @Test func aBodyLargerThanAUsersHalfOfTheBudgetIsRefusedAndStoresNothing() async throws {
        try await RunningRelay.with(extraArguments: Self.arguments) { relay in
            let subject = RelayTestServer.uniqueName("user")
            let error = try await #require(throws: MirrorError.self) {
                try await relay.client(subject).commit([Self.save("big", padding: Self.budget / 2 + 1)], to: Self.zone)
            }
            #expect(error.kind == .invalidRecord, "\(error)")
            #expect(error.message.contains("larger than \(Self.budget / 2) bytes"), "\(error.message)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }

    @Test func bodiesPastTheBudgetAreAnswered503UntilTheBodiesHeldAreAnswered() async throws {
        try await RunningRelay.with(extraArguments: Self.arguments) { relay in
            let (mallory, bob, alice) = (
                RelayTestServer.uniqueName("mallory"), RelayTestServer.uniqueName("bob"), RelayTestServer.uniqueName("alice"))
            let (malloryToken, bobToken, aliceToken) = (
                try await RelayTestServer.token(mallory), try await RelayTestServer.token(bob), try await RelayTestServer.token(alice))
            // A declared length holds nothing: only bytes that arrived count.
            let declaredOnly = try HeldBody(relay, token: malloryToken, declared: Self.budget / 2, sent: 1)
            #expect(try await Self.probe(relay, token: aliceToken).status == 200)
            await declaredOnly.stop()

            // Mallory and bob each send 450,000 bytes of a commit, then a byte a second.
            let held = [
                try HeldBody(relay, token: malloryToken, declared: 500_000, sent: 450_000),
                try HeldBody(relay, token: bobToken, declared: 500_000, sent: 450_000),
            ]
            let busy = try await Self.probe(relay, token: aliceToken, until: 503)
            #expect(busy.status == 503)
            #expect(busy.code == "unavailable")
            #expect(busy.retryAfter == "1")
            // Mallory may not hold more than half the budget, even for a small request's
            // sake; a body of at most 64 KiB (a poll, a token) always passes.
            #expect(try await Self.probe(relay, token: malloryToken, bytes: 100_000).status == 503)
            #expect(try await Self.probe(relay, token: aliceToken, bytes: 1_000).status == 200)
            // An app's commit meanwhile: a transient error that stored nothing.
            let client = relay.client(alice)
            let error = try await #require(throws: MirrorError.self) {
                try await client.commit([Self.save("waiting", padding: 300_000)], to: Self.zone)
            }
            #expect(error.kind.isTransient, "\(error)")
            #expect(error.nothingStored, "\(error)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])

            // The held commits' clients go away: their bytes are the budget's again.
            for body in held { await body.stop() }
            #expect(try await Self.probe(relay, token: aliceToken, until: 200).status == 200)
            try await client.commit([Self.save("waiting", padding: 300_000)], to: Self.zone)
            #expect(try await relay.admin("SELECT id FROM magicmirror.records") == ["waiting"])
        }
    }

    /// A body sent a byte a second is answered 408 once it has taken longer than 30 seconds
    /// and one more per 32 KiB, and stores nothing.
    @Test func aBodySentTooSlowlyIsAnswered408() async throws {
        try await RunningRelay.with(extraArguments: Self.arguments) { relay in
            let token = try await RelayTestServer.token(RelayTestServer.uniqueName("mallory"))
            let slow = try HeldBody(relay, token: token, declared: 100_000, sent: 10)
            let connection = slow.connection
            let answer = await Task.detached { connection.response(waitingUpTo: 120) }.value
            await slow.stop()
            #expect(answer.hasPrefix("HTTP/1.1 408"), "\(answer)")
            #expect(answer.contains("arrived slower than 32 KiB/s"), "\(answer)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }
}
