import Foundation
import JWTKit
import MagicMirror
import MirrorTestSupport
@_spi(RelayProtocol) import MagicMirrorRelay
import Testing

/// One token holder cannot make the relay do unbounded work for them: watched sessions are
/// capped per user, and an idempotency key guards its first body only.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayAbuseTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    /// A watch of `zone` from the initial token: answered at once when the zone has records.
    static func watch(_ session: String, _ zone: ZoneID) throws -> Data {
        try JSONEncoder().encode(RelayWire.WatchRequest(session: session, zones: [.init(zone: zone, token: .initial)]))
    }

    @Test func aUserWatchesThroughABoundedNumberOfSessions() async throws {
        try await RunningRelay.with { relay in
            let name = RelayTestServer.uniqueName("mallory")
            let zone = ZoneID.public(RelayTestServer.uniqueName("Board"))
            try await relay.client(name).commit([Self.save("a", 1)], to: zone)
            let token = try await RelayTestServer.token(name)
            for index in 0..<16 {
                let answer = try await relay.send("/v1/watch", body: try Self.watch("s\(index)", zone), token: token)
                #expect(answer.status == 200, "session \(index)")
            }
            let refused = try await relay.send("/v1/watch", body: try Self.watch("s16", zone), token: token)
            #expect(refused.status == 429)
            #expect(RelayHostileInputTests.code(refused.body) == "tooManyRequests")
            // A session already known keeps polling, and another user is not limited.
            let known = try await relay.send("/v1/watch", body: try Self.watch("s3", zone), token: token)
            #expect(known.status == 200)
            let other = try await RelayTestServer.token(RelayTestServer.uniqueName("alice"))
            let alice = try await relay.send("/v1/watch", body: try Self.watch("s16", zone), token: other)
            #expect(alice.status == 200)
        }
    }

    /// A commit of `operations` to `zone`, as JSON.
    static func commit(_ zone: ZoneID, _ operations: [RecordOperation], writer: String = "w") throws -> Data {
        try JSONEncoder().encode(RelayWire.CommitRequest(zone: zone, writerID: writer, operations: operations.map(RelayWire.Operation.init)))
    }

    @Test func anIdempotencyKeyReusedWithAnotherBodyIsRefusedAndStoresNothing() async throws {
        try await RunningRelay.with { relay in
            let token = try await RelayTestServer.token(RelayTestServer.uniqueName("user"))
            let zone = ZoneID.public(RelayTestServer.uniqueName("Board"))
            let first = try Self.commit(zone, [Self.save("r1", 1)])
            let key = ["Idempotency-Key": "k-same"]
            let applied = try await relay.send("/v1/commit", body: first, token: token, headers: key)
            #expect(applied.status == 200)
            let other = try await relay.send("/v1/commit", body: try Self.commit(zone, [Self.save("r2", 2)]), token: token, headers: key)
            #expect(other.status == 409)
            #expect(RelayHostileInputTests.code(other.body) == "idempotencyKeyReused")
            let retried = try await relay.send("/v1/commit", body: first, token: token, headers: key)
            #expect(retried.status == 200)
            let answer = try JSONDecoder().decode(RelayWire.CommitResponse.self, from: retried.body)
            #expect(answer.replayed)
            let stored = try await RelayTestServer.admin("SELECT id FROM magicmirror.records ORDER BY id", database: relay.database)
            #expect(stored == ["r1"])
        }
    }

    @Test func aWriterIDBelongsToTheUserWhoFirstCommittedUnderIt() async throws {
        try await RunningRelay.with { relay in
            let bob = try await RelayTestServer.token(RelayTestServer.uniqueName("bob"))
            let alice = try await RelayTestServer.token(RelayTestServer.uniqueName("alice"))
            let zone = ZoneID.public(RelayTestServer.uniqueName("Board"))
            let bobs = try await relay.send("/v1/commit", body: try Self.commit(zone, [Self.save("b1", 1)], writer: "w-bob-device"), token: bob)
            #expect(bobs.status == 200)
            let spoofed = try await relay.send(
                "/v1/commit", body: try Self.commit(zone, [Self.save("a1", 2)], writer: "w-bob-device"), token: alice)
            #expect(spoofed.status == 403)
            #expect(RelayHostileInputTests.code(spoofed.body) == "writerTaken")
            let again = try await relay.send("/v1/commit", body: try Self.commit(zone, [Self.save("b2", 3)], writer: "w-bob-device"), token: bob)
            #expect(again.status == 200)
            let stored = try await RelayTestServer.admin("SELECT id FROM magicmirror.records ORDER BY id", database: relay.database)
            #expect(stored == ["b1", "b2"])
        }
    }

    @Test func setupRefusesARelayRoleItDidNotMake() async throws {
        let role = RelayTestServer.uniqueName("squatted")
        let database = RelayTestServer.uniqueName("relay")
        _ = try await RelayTestServer.admin("CREATE ROLE \(role) NOLOGIN")
        _ = try await RelayTestServer.admin("CREATE DATABASE \(database)")
        let setup = try await SetupGate.shared.run {
            try await Subprocess.run(
                BuiltProducts.executable("mirror-relay"),
                ["setup", "--admin-url", RelayTestServer.url(database: database), "--relay-role", role])
        }
        _ = try await RelayTestServer.admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
        _ = try await RelayTestServer.admin("DROP ROLE IF EXISTS \(role)")
        #expect(setup.termination != .exited(0))
        #expect(setup.standardError.contains(role), "\(setup.standardError)")
    }

    @Test func theRelaysSessionsHaveLockAndStatementTimeouts() async throws {
        try await RunningRelay.with { relay in
            let settings = try await RelayTestServer.admin(
                """
                SELECT unnest(setconfig) FROM pg_db_role_setting
                WHERE setdatabase = 0 AND setrole = (SELECT oid FROM pg_roles WHERE rolname = '\(RelayTestServer.relayRole)')
                ORDER BY 1
                """, database: relay.database)
            #expect(settings == ["lock_timeout=5s", "statement_timeout=60s"])
        }
    }

    struct NotYetValid: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        var nbf: NotBeforeClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test func notYetValidTooLongLivedAndUnknownKeyTokensAreRefused() async throws {
        try await RunningRelay.with { relay in
            let name = RelayTestServer.uniqueName("mallory")
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: RelayTestServer.secret), digestAlgorithm: .sha256, kid: "zzz")
            let claims = RelayTestServer.Claims(
                sub: .init(value: name), exp: .init(value: Date().addingTimeInterval(3600)), aud: .init(value: [RelayTestServer.audience]))
            let unknownKid = try await keys.sign(claims, kid: "zzz")
            let notYet = try await keys.sign(
                NotYetValid(sub: claims.sub, exp: claims.exp, aud: claims.aud, nbf: .init(value: Date().addingTimeInterval(86_400))),
                kid: "zzz")
            let plain = JWTKeyCollection()
            await plain.add(hmac: HMACKey(from: RelayTestServer.secret), digestAlgorithm: .sha256)
            let notYetWithoutKid = try await plain.sign(
                NotYetValid(sub: claims.sub, exp: claims.exp, aud: claims.aud, nbf: .init(value: Date().addingTimeInterval(86_400))))
            let longLived = try await RelayTestServer.token(name, expiresIn: 2 * 86_400)
            let zone = ZoneID.public("Todo")
            for (label, token) in [("unknown kid", unknownKid), ("nbf ahead", notYet), ("nbf ahead, no kid", notYetWithoutKid),
                                   ("exp two days ahead", longLived)] {
                let answer = try await relay.send("/v1/commit", body: try Self.commit(zone, [Self.save("a", 1)]), token: token)
                #expect(answer.status == 401, "\(label)")
                #expect(RelayHostileInputTests.code(answer.body) == "unauthorized", "\(label)")
            }
            let stored = try await RelayTestServer.admin("SELECT count(*)::text FROM magicmirror.records", database: relay.database)
            #expect(stored == ["0"])
        }
    }
}
