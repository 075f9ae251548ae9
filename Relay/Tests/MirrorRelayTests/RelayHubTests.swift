import Foundation
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
@testable import MirrorRelayServer
import Testing

/// The hub's subscriptions, driven in this process on a relay's database: one per user and
/// private zone, one per public zone for every user watching it.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayHubTests {
    @Test func usersWatchingOnePublicZoneShareOneSubscriptionAndAllHearItsCommits() async throws {
        try await RunningRelay.with { relay in
            let users = RelayUsers(
                url: RelayTestServer.url(database: relay.database, role: RelayTestServer.relayRole), environment: [:],
                connections: 3, logger: Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() }))
            let hub = RelayHub()
            let names = (0..<3).map { _ in RelayTestServer.uniqueName("user") }
            var databases: [PostgreSQLDatabase] = []
            for name in names { databases.append(try await users.database(for: name)) }
            let zone = ZoneID.public("Todo")
            func poll(_ index: Int, with zones: [ZoneID]) async throws -> [RemoteNotification] {
                try await hub.poll(
                    RelayWire.WatchRequest(session: "s\(index)", zones: zones.map { .init(zone: $0, token: .initial) }),
                    subject: names[index], database: databases[index])
            }
            // Each user watches the public zone and a private zone of their own.
            for index in names.indices {
                _ = try await poll(index, with: [zone, .private("Todo", user: names[index])])
            }
            #expect(hub.counts.watches == 1 + names.count)
            // A commit to the public zone is heard by every user's session.
            try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: names[0])) {
                _ = try await databases[0].commit(
                    [.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000, counter: 0))],
                    to: zone)
            }
            for index in names.indices {
                var heard: [String] = []
                let deadline = ContinuousClock.now + .seconds(60)
                while !heard.contains("a"), ContinuousClock.now < deadline {
                    heard += try await poll(index, with: [zone, .private("Todo", user: names[index])])
                        .filter { $0.zone == zone }.flatMap(\.recordIDs)
                }
                #expect(heard.contains("a"), "user \(index)")
            }
            hub.sweep(now: .now + .seconds(3600))
            #expect(hub.counts.watches == 0)
            await users.close()
        }
    }

    /// The hint of what changed before a session watched a zone names the writer when one
    /// writer made every change, so that a client drops the hint of its own commit (which it
    /// delivered when it committed, perhaps after the relay read it); with two writers, none.
    @Test func aRegistrationHintNamesItsOnlyWriter() async throws {
        try await HubFixture.with { relay, hub, user, database in
            let zone = ZoneID.private("Todo", user: user)
            func commit(_ id: String, as writer: String, at millis: Int64) async throws {
                try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: user, writerID: writer)) {
                    _ = try await database.commit(
                        [.save(id, fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: millis, counter: 0))],
                        to: zone)
                }
            }
            func registrationHints(_ session: String) async throws -> [RemoteNotification] {
                try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: user)) {
                    try await hub.poll(
                        RelayWire.WatchRequest(session: session, zones: [.init(zone: zone, token: .initial)]),
                        subject: user, database: database)
                }
            }
            try await commit("a", as: "w-client", at: 1_000)
            #expect(try await registrationHints("s1").map(\.writer) == ["w-client"])
            try await commit("b", as: "w-other", at: 2_000)
            #expect(try await registrationHints("s2").map(\.writer) == [nil])
        }
    }
}

/// A hub driven in the test's process on a running relay's database, with a user of its own
/// and that user's database (as the relay's role).
enum HubFixture {
    static func with(
        _ body: (RunningRelay, RelayHub, String, PostgreSQLDatabase) async throws -> Void
    ) async throws {
        try await RunningRelay.with { relay in
            let users = RelayUsers(
                url: RelayTestServer.url(database: relay.database, role: RelayTestServer.relayRole), environment: [:],
                connections: 3, logger: Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() }))
            do {
                let user = RelayTestServer.uniqueName("user")
                try await body(relay, RelayHub(), user, try await users.database(for: user))
            } catch {
                await users.close()
                throw error
            }
            await users.close()
        }
    }

    /// A stream of `session`, as the user, watching the user's private zone `Todo` from its
    /// start, for a stream's time.
    static func openStream(
        _ hub: RelayHub, user: String, database: PostgreSQLDatabase, session: String
    ) async throws -> RelayHub.Stream {
        try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: user)) {
            try await hub.openStream(
                RelayWire.WatchRequest(session: session, zones: [.init(zone: .private("Todo", user: user), token: .initial)]),
                subject: user, database: database, until: .now + .seconds(RelayWire.streamSeconds))
        }
    }
}
