import Foundation
import MagicMirror
import MagicMirrorRelay
import MirrorTestSupport
import Testing

/// Several relays behind haproxy share one PostgreSQL: clients converge whichever relay
/// serves each request, and a client whose relay dies goes on through another.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayScaleOutTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    /// A replicated database over a relay client of `subject` at `url`, in a new directory
    /// that `directories` collects for removal.
    static func replica(_ subject: String, at url: URL, in directories: inout [URL]) throws -> ReplicatedDatabase {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-replica-" + UUID().uuidString)
        directories.append(directory)
        return ReplicatedDatabase(
            local: try JSONFileDatabase(directory: directory), remote: RunningRelay.client(subject, at: url),
            maximumRetryDelay: .seconds(2))
    }

    /// Users first seen by two relays at once are provisioned once, and each relay acts for
    /// them at once: one provision of a subject at a time across relays, and a role the
    /// relay may set on every connection when its provision returns.
    @Test func usersFirstSeenByTwoRelaysAtOnceAreServedByBoth() async throws {
        try await RunningRelay.with { first in
            let second = try await RunningRelay.start(sharing: first)
            defer { second.process.kill() }
            let subjects = (0..<20).map { _ in RelayTestServer.uniqueName("user") }
            let failures = try await withThrowingTaskGroup(of: String?.self) { group in
                for subject in subjects {
                    for relay in [first, second] {
                        group.addTask {
                            do {
                                _ = try await relay.client(subject).currentToken(in: .private("Todo", user: subject))
                                return nil
                            } catch {
                                return "\(subject): \(error)"
                            }
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
            }
            #expect(failures.isEmpty, "\(failures)")
            let provisioned = try await first.admin("SELECT subject FROM magicmirror_relay.users ORDER BY subject")
            #expect(provisioned == subjects.sorted())
            await second.stop(keepingDatabase: true)
        }
    }

    @Test func twoClientsThroughTwoRelaysBehindABalancerConverge() async throws {
        try await RunningRelay.with { first in
            let second = try await RunningRelay.start(sharing: first)
            defer { second.process.kill() }
            try await RunningBalancer.with([first, second]) { balancer in
                let zone = ZoneID.public("Todo")
                var directories: [URL] = []
                defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
                let alice = try Self.replica(RelayTestServer.uniqueName("alice"), at: balancer.url, in: &directories)
                let bob = try Self.replica(RelayTestServer.uniqueName("bob"), at: balancer.url, in: &directories)
                // Each app opens the zone, as a mirror opening it would: it is synchronised.
                _ = try await alice.fetchAll(in: zone)
                _ = try await bob.fetchAll(in: zone)
                try await alice.commit([Self.save("milk", 1)], to: zone)
                try await bob.commit([Self.save("bread", 2)], to: zone)
                try await Convergence.wait(alice, in: zone, holds: ["milk", "bread"], "alice's app hears bob's commit")
                try await Convergence.wait(bob, in: zone, holds: ["milk", "bread"], "bob's app hears alice's commit")
                #expect(Set(try await alice.fetchAll(in: zone).records.map(\.id)) == ["milk", "bread"])
                #expect(Set(try await bob.fetchAll(in: zone).records.map(\.id)) == ["milk", "bread"])
                // Both relays served requests, and the server stored each record once.
                let sessions = try await balancer.sessions()
                #expect(sessions["relay0"].map { $0.total > 0 } == true, "\(sessions)")
                #expect(sessions["relay1"].map { $0.total > 0 } == true, "\(sessions)")
                #expect(try await first.admin("SELECT id || ':' || version FROM magicmirror.records ORDER BY id") == ["bread:1", "milk:1"])
            }
            await second.stop(keepingDatabase: true)
        }
    }

    @Test func aClientWhoseRelayDiesGoesOnThroughTheBalancer() async throws {
        try await RunningRelay.with { first in
            let second = try await RunningRelay.start(sharing: first)
            defer { second.process.kill() }
            let relays = [first, second]
            // `source`: every request of this machine goes to one relay while it lives.
            try await RunningBalancer.with(relays, balance: "source") { balancer in
                let zone = ZoneID.public("Todo")
                var directories: [URL] = []
                defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
                let listener = try Self.replica(RelayTestServer.uniqueName("alice"), at: balancer.url, in: &directories)
                let writer = RunningRelay.client(RelayTestServer.uniqueName("bob"), at: balancer.url)
                _ = try await listener.fetchAll(in: zone)
                try await writer.commit([Self.save("before", 1)], to: zone)
                try await Convergence.wait(listener, in: zone, holds: ["before"], "the commit before the relay dies")

                // The listener's long poll is on the one relay that served every request so far.
                let served = try await balancer.sessions().filter { $0.value.total > 0 }.map(\.key)
                try #require(served.count == 1, "\(served)")
                let index = try #require(Int(served[0].dropFirst("relay".count)))
                let dying = relays[index]
                dying.process.kill()
                _ = try await dying.process.wait()

                // A commit through the other relay reaches the listener, which pulls since its token.
                try await Convergence.commitRetrying([Self.save("after", 2)], to: zone, on: writer)
                try await Convergence.wait(listener, in: zone, holds: ["before", "after"], "the commit after the relay died")
                let survivor = try await balancer.sessions()["relay\(1 - index)"]
                #expect(survivor.map { $0.total > 0 } == true, "the other relay served nothing")
                #expect(try await first.admin("SELECT id || ':' || version FROM magicmirror.records ORDER BY id") == ["after:1", "before:1"])
            }
            await second.stop(keepingDatabase: true)
        }
    }
}
