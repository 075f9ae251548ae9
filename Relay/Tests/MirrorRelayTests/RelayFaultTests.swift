import Foundation
import MagicMirror
import MagicMirrorRelay
import MirrorTestSupport
import Synchronization
import Testing

/// A relay, or the server under it, killed with SIGKILL while clients commit: no
/// acknowledged commit is lost, and none is applied twice.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayFaultTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    /// Each record's id and version, as the server stores them.
    static let storedRecords = "SELECT id || ':' || version FROM magicmirror.records ORDER BY id"

    @Test func aRelayKilledInTheMiddleOfCommitsLosesNoneAndAppliesEachOnce() async throws {
        try await RunningRelay.with { first in
            let restarted = Mutex<[RunningRelay]>([])
            defer { for relay in restarted.withLock({ $0 }) { relay.process.kill() } }
            let subject = RelayTestServer.uniqueName("user")
            let zone = ZoneID.private("Todo", user: subject)
            let client = first.client(subject)
            let count = 40
            let (progress, acknowledged) = AsyncStream.makeStream(of: Int.self)
            // The app commits one record after another; a commit that fails for want of the
            // relay is committed again (the same operations), as an app's outbox does.
            let committing = Task {
                defer { acknowledged.finish() }
                for index in 0..<count {
                    let (outcome, _) = try await Convergence.commitRetrying([Self.save("r\(index)", index)], to: zone, on: client)
                    #expect(outcome.isApplied, "r\(index): \(outcome.results)")
                    acknowledged.yield(index + 1)
                }
            }
            defer { committing.cancel() }
            var relay = first
            var committed = progress.makeAsyncIterator()
            for killAfter in [10, 25] {
                while let done = await committed.next(), done < killAfter {}
                relay.process.kill()
                _ = try await relay.process.wait()
                relay = try await RunningRelay.start(sharing: first, port: first.port)
                restarted.withLock { [relay] in $0.append(relay) }
            }
            // The kills came while the app was committing (after 10 and 25 of 40): each commit
            // in flight then was sent again, by RelayDatabase with its key (after 0.25 and
            // 0.5 s) and, when the relay was not back by then, by the app.
            try await committing.value
            let expected = (0..<count).map { "r\($0):1" }.sorted()
            // Every acknowledged commit is stored once, at version 1: a retry stored nothing again.
            let stored = try await first.admin(Self.storedRecords).sorted()
            #expect(stored == expected, "\(stored)")
            let seen = try await client.fetchAll(in: zone).records
            #expect(seen.map { "\($0.id):\($0.version)" }.sorted() == expected)
            await relay.stop(keepingDatabase: true)
        }
    }

    @Test func aCommitWhoseAnswerABalancerLostIsSentAgainWithItsKeyAndAppliedOnce() async throws {
        try await RunningRelay.with { relay in
            let gateway = try LossyGateway(relay: relay.url)
            defer { gateway.stop() }
            let subject = RelayTestServer.uniqueName("user")
            let zone = ZoneID.private("Todo", user: subject)
            let client = RunningRelay.client(subject, at: gateway.url)
            // The relay stores the commit and the gateway answers 502: the client sends it again.
            let outcome = try await client.commit([Self.save("milk", 1)], to: zone)
            #expect(outcome.isApplied)
            let keys = gateway.commitKeys
            #expect(keys.count == 2 && Set(keys).count == 1, "\(keys)")
            // The second was answered from the key the first recorded: nothing stored twice.
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror_relay.commits") == ["1"])
            #expect(try await relay.admin(Self.storedRecords) == ["milk:1"])
        }
    }

    @Test func aServerKilledUnderARelayLosesNoAcknowledgedCommit() async throws {
        try await RelayCluster.with { cluster in
            let relay = try await RunningRelay.start(server: cluster.adminURL)
            defer { relay.process.kill() }
            let zone = ZoneID.public("Todo")
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-replica-" + UUID().uuidString)
            defer { try? FileManager.default.removeItem(at: directory) }
            let listener = ReplicatedDatabase(
                local: try JSONFileDatabase(directory: directory), remote: relay.client(RelayTestServer.uniqueName("alice")),
                maximumRetryDelay: .seconds(2))
            let writer = relay.client(RelayTestServer.uniqueName("bob"))
            _ = try await listener.fetchAll(in: zone)
            try await writer.commit([Self.save("before", 1)], to: zone)
            try await Convergence.wait(listener, in: zone, holds: ["before"], "the commit before the server dies")

            try await cluster.kill()
            // While the server is down the relay answers that it is unavailable, and stores
            // nothing; the listener's app commits to its replica.
            let refused = try await #require(throws: MirrorError.self) {
                try await writer.commit([Self.save("during", 2)], to: zone)
            }
            #expect(refused.kind.isTransient, "\(refused)")
            try await listener.commit([Self.save("offline", 3)], to: zone)

            try await cluster.startAgain()
            // The refused commit, sent again, and a new one are stored once each, and both
            // clients converge on everything.
            try await Convergence.commitRetrying([Self.save("during", 2)], to: zone, on: writer)
            try await Convergence.commitRetrying([Self.save("after", 4)], to: zone, on: writer)
            let all: Set = ["before", "during", "offline", "after"]
            try await Convergence.wait(listener, in: zone, holds: all, "the listener after the server came back")
            try await Convergence.wait(writer, in: zone, holds: all, "the writer after the server came back")
            #expect(try await relay.admin(Self.storedRecords) == ["after:1", "before:1", "during:1", "offline:1"])
            await relay.stop()
        }
    }
}
