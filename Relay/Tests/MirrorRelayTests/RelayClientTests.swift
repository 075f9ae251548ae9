import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JWTKit
import MagicMirror
@testable import MagicMirrorRelay
import MirrorTestSupport
import Synchronization
import Testing

/// `RelayDatabase` beyond the conformance suite: tokens that expire, a replica on top, ES256.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayClientTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    /// By default a relay database's requests go through a session of the library's own,
    /// with no cache and no cookies: FoundationNetworking looked every request up in the
    /// shared session's cache, a directory on disk, whatever its cache policy (about 2 % of
    /// a client's processor per commit in `relay-bench --only commit`). A session passed in
    /// is the one used.
    @Test func requestsGoThroughASessionWithNoCache() throws {
        let url = try #require(URL(string: "http://127.0.0.1:9"))
        let database = RelayDatabase(url: url, user: try MirrorUser(name: "someone")) { "token" }
        #expect(database.transport.session === RelayTransport.uncachedSession)
        let configuration = database.transport.session.configuration
        #expect(configuration.urlCache == nil)
        #expect(configuration.httpCookieStorage == nil)
        #expect(configuration.requestCachePolicy == .reloadIgnoringLocalAndRemoteCacheData)
        let mine = URLSession(configuration: .ephemeral)
        let given = RelayDatabase(url: url, user: try MirrorUser(name: "someone"), session: mine) { "token" }
        #expect(given.transport.session === mine)
    }

    @Test func anExpiredTokenIsAskedForAgainOnce() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let calls = Mutex(0)
            let database = RelayDatabase(url: relay.url, user: try MirrorUser(name: subject)) {
                let call = calls.withLock { calls in
                    calls += 1
                    return calls
                }
                // The first token has expired: the relay says so, and the provider is asked again.
                return try await RelayTestServer.token(subject, expiresIn: call == 1 ? -60 : 3600)
            }
            let outcome = try await database.commit([Self.save("a", 1)], to: .public("Todo"))
            #expect(outcome.isApplied)
            #expect(calls.withLock { $0 } == 2)
            #expect(try await database.fetchAll(in: .public("Todo")).records.map(\.id) == ["a"])
            #expect(calls.withLock { $0 } == 2)
        }
    }

    @Test func aTokenThatKeepsExpiringIsAnError() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let database = RelayDatabase(url: relay.url, user: try MirrorUser(name: subject)) { try await RelayTestServer.token(subject, expiresIn: -60) }
            let error = try await #require(throws: MirrorError.self) {
                try await database.commit([Self.save("a", 1)], to: .public("Todo"))
            }
            #expect(error.kind == .permissionDenied)
            #expect(error.message.contains("expired"))
        }
    }

    @Test func twoReplicasConvergeThroughTheRelay() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let zone = ZoneID.private("Todo", user: subject)
            let directories = (0..<2).map { _ in
                FileManager.default.temporaryDirectory.appendingPathComponent("relay-replica-" + UUID().uuidString)
            }
            defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
            let first = ReplicatedDatabase(local: try JSONFileDatabase(directory: directories[0]), remote: relay.client(subject))
            let second = ReplicatedDatabase(local: try JSONFileDatabase(directory: directories[1]), remote: relay.client(subject))
            try await first.commit([Self.save("milk", 1)], to: zone)
            try await first.synchronize()
            _ = try await second.fetchAll(in: zone)
            try await second.synchronize()
            #expect(try await second.fetchAll(in: zone).records.map(\.id) == ["milk"])
            try await second.commit([Self.save("bread", 2)], to: zone)
            try await second.synchronize()
            try await first.synchronize()
            #expect(Set(try await first.fetchAll(in: zone).records.map(\.id)) == ["milk", "bread"])
        }
    }

    @Test func anES256TokenSignedWithAConfiguredKeyIsAccepted() async throws {
        let key = ES256PrivateKey()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("relay-es256-\(UUID().uuidString).pem")
        try key.publicKey.pemRepresentation.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let relay = try await RunningRelay.start(extraArguments: ["--es256-public-key", "k1=\(file.path)"])
        do {
            let subject = RelayTestServer.uniqueName("user")
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: key, kid: "k1")
            let claims = RelayTestServer.Claims(
                sub: .init(value: subject), exp: .init(value: Date().addingTimeInterval(3600)),
                aud: .init(value: [RelayTestServer.audience]))
            let token = try await keys.sign(claims, kid: "k1")
            let database = RelayDatabase(url: relay.url, user: try MirrorUser(name: subject)) { token }
            #expect(try await database.commit([Self.save("a", 1)], to: .public("Todo")).isApplied)
            // The same claims signed with another ES256 key under the same id are refused.
            let other = JWTKeyCollection()
            await other.add(ecdsa: ES256PrivateKey(), kid: "k1")
            let forged = try await other.sign(claims, kid: "k1")
            let answer = try await relay.send("/v1/token", body: Data("{\"zone\":{\"scope\":\"public\",\"recordType\":\"Todo\"}}".utf8), token: forged)
            #expect(answer.status == 401)
            await relay.stop()
        } catch {
            await relay.stop()
            throw error
        }
    }
}

/// The `mirror-relay` executable: its help, its configuration errors, and its refusal to
/// run as a role that could bypass row-level security.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayExecutableTests {
    static let executable = BuiltProducts.executable("mirror-relay")

    @Test func helpDescribesEveryOption() async throws {
        let run = try await Subprocess.run(Self.executable, ["--help"])
        #expect(run.termination == .exited(0))
        for option in ["--database-url", "--listen", "--hs256-secret", "--es256-public-key", "--audience", "setup", "/health"] {
            #expect(run.standardOutput.contains(option), "\(option)")
        }
    }

    @Test(arguments: [
        (["--listen", "127.0.0.1:0"], "no database"),
        (["--database-url", "postgres://x@127.0.0.1/x"], "no audience"),
        (["--database-url", "postgres://x@127.0.0.1/x", "--audience", "a"], "no token key"),
        (["--database-url", "postgres://x@127.0.0.1/x", "--audience", "a", "--hs256-secret", "s", "--listen", "nowhere"], "--listen"),
        (["--bogus", "1"], "unknown option"),
    ])
    func aBadConfigurationIsNamed(_ arguments: [String], _ message: String) async throws {
        let run = try await Subprocess.run(Self.executable, arguments, environment: ["MIRROR_RELAY_HS256_SECRET": ""])
        #expect(run.termination == .exited(1))
        #expect(run.standardError.contains(message), "\(run.standardError)")
    }

    @Test func aSuperuserRoleIsRefused() async throws {
        let run = try await Subprocess.run(
            Self.executable,
            ["--database-url", RelayTestServer.url(database: "postgres"), "--audience", "a", "--hs256-secret", "s",
             "--listen", "127.0.0.1:0"])
        #expect(run.termination == .exited(1))
        #expect(run.standardError.contains("superuser"), "\(run.standardError)")
    }
}
