import Foundation
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import MirrorTestSupport
import Synchronization
import Testing

/// A lost stream is not silent: the app hears of the outage once, as a transient
/// `.mirrorError`, and hears other writers' changes again when the relay is back.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayOutageTests {
    private static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    @Test func aRelayThatDiesIsReportedOnceAndItsChangesArriveWhenItIsBack() async throws {
        let first = try await RunningRelay.start()
        var relay = first
        do {
            let subject = RelayTestServer.uniqueName("user")
            let zone = ZoneID.private("Todo", user: subject)
            let listener = first.client(subject)
            let identifier = listener.identifier
            // This relay's outages only (other tests kill relays of their own meanwhile).
            let outages = Mutex<[MirrorError]>([])
            let (reported, report) = AsyncStream.makeStream(of: Void.self)
            let observer = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) { note in
                guard let error = note.object as? MirrorError, error.message.contains(identifier) else { return }
                outages.withLock { $0.append(error) }
                report.yield()
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            let (heard, hear) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try listener.subscribe(to: zone) { hear.yield($0) }
            defer { subscription.cancel() }
            try await first.client(subject).commit([Self.save("before", 1)], to: zone)
            try await withSubprocessTimeout(.seconds(60), "the first hint") {
                for await hint in heard where hint.recordIDs.contains("before") { return }
            }

            relay.process.kill()
            _ = try await relay.process.wait()
            try await withSubprocessTimeout(.seconds(60), "the outage's report") {
                for await _ in reported { return }
            }
            relay = try await RunningRelay.start(sharing: first, port: first.port)
            try await Convergence.commitRetrying([Self.save("after", 2)], to: zone, on: first.client(subject))
            // The hint of the commit made while the listener was cut off, once it polls again.
            try await withSubprocessTimeout(.seconds(120), "the hint after the outage") {
                for await hint in heard where hint.recordIDs.contains("after") { return }
            }
            let seen = outages.withLock { $0 }
            #expect(seen.count == 1, "\(seen.map(\.message))")
            #expect(seen.first?.kind == .unavailable)
            #expect(seen.first?.message.contains("lost the stream") == true, "\(seen.first?.message ?? "")")
            await relay.stop()
        } catch {
            await relay.stop()
            throw error
        }
    }

    /// A hint whose answer was lost on the way (the client polls again naming the token it
    /// had) is sent again, not forgotten: the next poll gets it at once.
    @Test func aHintWhoseAnswerWasLostIsSentAgain() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let zone = ZoneID.private("Todo", user: subject)
            let token = try await RelayTestServer.token(subject)
            let writer = relay.client(subject)
            try await writer.commit([Self.save("first", 1)], to: zone)
            let known = try await writer.currentToken(in: zone)
            func poll() async throws -> [RemoteNotification] {
                let body = try JSONEncoder().encode(
                    RelayWire.WatchRequest(session: "lossy", zones: [RelayWire.ZoneToken(zone: zone, token: known)]))
                let answer = try await relay.send("/v1/watch", body: body, token: token)
                try #require(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                return try JSONDecoder().decode(RelayWire.Hints.self, from: answer.body).hints
            }
            // The session starts at `known`; a commit comes; the poll that carries its hint is
            // answered (and, say, lost on the way).
            #expect(try await poll().isEmpty)
            let outcome = try await writer.commit([Self.save("second", 2)], to: zone)
            var carried: [RemoteNotification] = []
            while carried.isEmpty { carried = try await poll() }
            #expect(carried.map(\.token) == [outcome.token])
            // Polling again with the old token: the hint again, at once, with the newest token.
            let again = try await poll()
            #expect(again.map(\.token) == [outcome.token], "\(again)")
        }
    }
}
