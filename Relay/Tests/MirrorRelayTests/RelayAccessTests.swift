import Foundation
import MagicMirror
import MagicMirrorRelay
import MirrorTesting
import Testing

/// Who may do what through the relay: row-level security, for the token's subject, decides.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayAccessTests {
    static func save(_ id: String, _ value: Int, base: Int = 0) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: base, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    @Test func twoUsersCannotReadOrWriteEachOthersPrivateZones() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let alice = relay.client(aliceName)
            let bob = relay.client(bobName)
            let alicesZone = ZoneID.private("Todo", user: aliceName)
            try await alice.commit([Self.save("secret", 1)], to: alicesZone)
            try await bob.commit([Self.save("mine", 1)], to: .private("Todo", user: bobName))

            // Reading: row-level security shows bob nothing of alice's zone.
            #expect(try await bob.fetchAll(in: alicesZone).records.isEmpty)
            #expect(try await bob.fetch(["secret"], in: alicesZone).isEmpty)
            #expect(try await bob.changes(in: alicesZone, since: .initial).records.isEmpty)
            // Writing: refused, and nothing is stored.
            let error = try await #require(throws: MirrorError.self) {
                try await bob.commit([Self.save("planted", 2)], to: alicesZone)
            }
            #expect(error.kind == .permissionDenied)
            // The message names bob and alice's zone, never the relay's own role.
            #expect(error.message.contains("\(bobName) may not write zone"), "\(error.message)")
            #expect(!error.message.contains(RelayTestServer.relayRole), "\(error.message)")
            let overwrite = try await #require(throws: MirrorError.self) {
                try await bob.commit([Self.save("secret", 3, base: 1)], to: alicesZone)
            }
            #expect(overwrite.kind == .permissionDenied)
            // An empty commit, which reaches no row, and a collection of assets: refused too.
            let empty = try await #require(throws: MirrorError.self) { try await bob.commit([], to: alicesZone) }
            #expect(empty.kind == .permissionDenied)
            let collect = try await #require(throws: MirrorError.self) { try await bob.removeUnreferencedAssets(in: alicesZone) }
            #expect(collect.kind == .permissionDenied)
            let alicesRecords = try await alice.fetchAll(in: alicesZone).records
            #expect(alicesRecords.map(\.id) == ["secret"])
            #expect(alicesRecords.first?.version == 1)
            #expect(try await alice.fetchAll(in: .private("Todo", user: bobName)).records.isEmpty)
        }
    }

    /// The server's superuser (the tests' administrator), the relay's own role, a built-in role.
    @Test(arguments: [RelayTestServer.adminRole, RelayTestServer.relayRole, "pg_monitor"])
    func aSubjectNamingAnExistingRoleIsRefused(_ subject: String) async throws {
        try await RunningRelay.with { relay in
            let database = relay.client(subject)
            let error = try await #require(throws: MirrorError.self) {
                try await database.commit([Self.save("r", 1)], to: .public("Todo"))
            }
            #expect(error.kind == .permissionDenied)
            let stored = try await RelayTestServer.admin(
                "SELECT count(*)::text FROM magicmirror.records", database: relay.database)
            #expect(stored == ["0"])
        }
    }

    @Test func aCommitRetriedWithItsIdempotencyKeyIsAppliedOnce() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(subject)
            let body = Data(
                """
                {"zone":{"scope":"public","recordType":"Todo"},"writerID":"w1","operations":[
                {"id":"a","baseVersion":0,"fields":"\(Data("{\"v\":1}".utf8).base64EncodedString())",
                 "timestamp":"5-0"}]}
                """.utf8)
            let headers = ["Idempotency-Key": "key-1", "Content-Type": "application/json"]
            let first = try await relay.send("/v1/commit", body: body, token: token, headers: headers)
            let again = try await relay.send("/v1/commit", body: body, token: token, headers: headers)
            #expect(first.status == 200)
            #expect(again.status == 200)
            let firstAnswer = try JSONSerialization.jsonObject(with: first.body) as? [String: Any]
            let againAnswer = try JSONSerialization.jsonObject(with: again.body) as? [String: Any]
            #expect(firstAnswer?["replayed"] as? Bool == false)
            #expect(againAnswer?["replayed"] as? Bool == true)
            let rows = try await RelayTestServer.admin(
                "SELECT id || ' ' || version FROM magicmirror.records", database: relay.database)
            #expect(rows == ["a 1"])
            let keys = try await RelayTestServer.admin(
                "SELECT subject || ' ' || key FROM magicmirror_relay.commits", database: relay.database)
            #expect(keys == ["\(subject) key-1"])
            // Another key with another change is another commit: based on version 0, it
            // conflicts now.
            let later = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "\"5-0\"", with: "\"6-0\"")
            let other = try await relay.send(
                "/v1/commit", body: Data(later.utf8), token: token, headers: ["Idempotency-Key": "key-2"])
            let otherAnswer = try JSONSerialization.jsonObject(with: other.body) as? [String: Any]
            let results = otherAnswer?["results"] as? [[String: Any]]
            #expect(results?.first?["status"] as? String == "conflict")
        }
    }

    /// A user whose role the relay cannot set now (the server refused `SET ROLE`: a
    /// membership granted moments ago and not yet seen by a session, or taken away) is told
    /// to try again, with nothing done, not refused for good; once the relay may act as the
    /// user again, the same request passes.
    @Test func aRoleTheServerWillNotSetNowIsATransientError() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let client = relay.client(subject)
            let zone = ZoneID.private("Todo", user: subject)
            _ = try await client.currentToken(in: zone)
            _ = try await relay.admin("REVOKE \"\(subject)\" FROM \(RelayTestServer.relayRole)")
            let error = try await #require(throws: MirrorError.self) { try await client.commit([Self.save("a", 1)], to: zone) }
            #expect(error.kind == .unavailable, "\(error)")
            #expect(error.kind.isTransient)
            #expect(error.nothingStored, "\(error)")
            #expect(error.message.contains("did not let this process act as"), "\(error.message)")
            _ = try await relay.admin("GRANT \"\(subject)\" TO \(RelayTestServer.relayRole)")
            try await client.commit([Self.save("a", 1)], to: zone)
            #expect(try await client.fetchAll(in: zone).records.map(\.id) == ["a"])
        }
    }
}
