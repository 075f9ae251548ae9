import Foundation
import MagicMirror
import MagicMirrorRelay
import MirrorTestSupport
import MirrorTesting
import Synchronization
import Testing

/// Hints through relays: one listening connection per relay fans out to its clients, and a
/// user hears only what row-level security lets them read.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayNotificationTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    @Test func aCommitThroughOneRelayIsHeardThroughAnother() async throws {
        try await RunningRelay.with { first in
            let second = try await RunningRelay.start(sharing: first)
            defer { second.process.kill() }
            let listener = first.client(RelayTestServer.uniqueName("user"))
            let writer = second.client(RelayTestServer.uniqueName("user"))
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try listener.subscribe(to: .public("Todo")) { continuation.yield($0) }
            defer { subscription.cancel() }
            let outcome = try await writer.commit([Self.save("x", 1)], to: .public("Todo"))
            let heard = try await stream.waitUntil(timeout: .seconds(60), "the other relay's commit") {
                $0.recordIDs.contains("x") && $0.token >= outcome.token
            }
            #expect(heard.reason == .created)
            #expect(heard.zone == .public("Todo"))
            #expect(heard.databaseIdentifier == listener.identifier)
            await second.stop(keepingDatabase: true)
        }
    }

    /// A zone subscribed while the client's stream is open is heard: the client opens its
    /// stream again naming it (the relay ends the old one), and hears the zones it watched
    /// before as well.
    @Test func aZoneSubscribedWhileTheStreamIsOpenIsHeard() async throws {
        try await RunningRelay.with { relay in
            let listener = relay.client(RelayTestServer.uniqueName("user"))
            let writer = relay.client(RelayTestServer.uniqueName("user"))
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let first = try listener.subscribe(to: .public("Todo")) { continuation.yield($0) }
            defer { first.cancel() }
            let before = try await writer.commit([Self.save("a", 1)], to: .public("Todo"))
            _ = try await stream.waitUntil(timeout: .seconds(60), "the first zone's commit") { $0.token >= before.token }
            let second = try listener.subscribe(to: .public("Notes")) { continuation.yield($0) }
            defer { second.cancel() }
            let added = try await writer.commit([Self.save("b", 2)], to: .public("Notes"))
            _ = try await stream.waitUntil(timeout: .seconds(120), "the added zone's commit") {
                $0.zone == .public("Notes") && $0.token >= added.token
            }
            let after = try await writer.commit([Self.save("c", 3)], to: .public("Todo"))
            _ = try await stream.waitUntil(timeout: .seconds(60), "the first zone's next commit") {
                $0.zone == .public("Todo") && $0.token >= after.token
            }
        }
    }

    @Test func aUserHearsNothingOfAnotherUsersPrivateZone() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let alice = relay.client(aliceName)
            let bob = relay.client(bobName)
            let alicesZone = ZoneID.private("Todo", user: aliceName)
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let heard = Mutex<[RemoteNotification]>([])
            let record: @Sendable (RemoteNotification) -> Void = { notification in
                heard.withLock { $0.append(notification) }
                continuation.yield(notification)
            }
            let spying = try bob.subscribe(to: alicesZone, handler: record)
            let public_ = try bob.subscribe(to: .public("Todo"), handler: record)
            defer { spying.cancel(); public_.cancel() }
            try await alice.commit([Self.save("secret", 1)], to: alicesZone)
            let outcome = try await alice.commit([Self.save("open", 2)], to: .public("Todo"))
            _ = try await stream.waitUntil(timeout: .seconds(60), "alice's public commit") {
                $0.zone == .public("Todo") && $0.token >= outcome.token
            }
            let all = heard.withLock { $0 }
            #expect(!all.contains { $0.zone == alicesZone })
            #expect(!all.contains { $0.recordIDs.contains("secret") })
        }
    }
}
