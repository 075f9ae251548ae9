import Foundation
import MagicMirror
import MagicMirrorRelay
import Testing

/// Shares through the relay (`/v1/share`, `/v1/revoke`, `/v1/shares`): each user acts on
/// their own zones only, as their own role, and row-level security decides.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelaySharingTests {
    static func save(_ id: String, _ value: Int) -> RecordOperation {
        .save(id, fields: Data("{\"v\":\(value)}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000 + Int64(value), counter: 0))
    }

    /// The shares stored in the relay's database, as `owner id recipient access`.
    static func storedShares(_ relay: RunningRelay) async throws -> [String] {
        try await RelayTestServer.admin(
            "SELECT owner || ' ' || id || ' ' || recipient || ' ' || access FROM magicmirror.shares ORDER BY 1",
            database: relay.database)
    }

    @Test func aShareShowsInTheRecipientsSharedZoneUntilItIsRevoked() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let (alice, bob) = (relay.client(aliceName), relay.client(bobName))
            let bobUser = try MirrorUser(name: bobName)
            let alicesZone = ZoneID.private("Todo", user: aliceName)
            let bobsSharedZone = ZoneID.shared("Todo", user: bobName)
            try await alice.commit([Self.save("shared", 1), Self.save("kept", 2)], to: alicesZone)
            #expect(try await bob.fetchAll(in: bobsSharedZone).records.isEmpty)

            try await alice.share(["shared"], in: alicesZone, with: bobUser, access: .readOnly)

            let seen = try await bob.fetchAll(in: bobsSharedZone).records
            #expect(seen.map(\.id) == ["shared"])
            #expect(seen.first?.fields == Data("{\"v\":1}".utf8))
            #expect(try await bob.fetch(["shared", "kept"], in: bobsSharedZone).map(\.id) == ["shared"])
            let expected = RecordShare(
                recordID: "shared", recordType: "Todo", owner: try MirrorUser(name: aliceName), recipient: bobUser,
                access: .readOnly)
            #expect(try await alice.shares(in: alicesZone) == [expected])
            #expect(try await bob.shares(in: bobsSharedZone) == [expected])
            // Read-only: bob's edit is refused, and alice's record is unchanged.
            let edit = try await #require(throws: MirrorError.self) {
                try await bob.commit(
                    [.save("shared", fields: Data("{\"v\":9}".utf8), baseVersion: 1, timestamp: HLCTimestamp(millis: 5_000, counter: 0))],
                    to: bobsSharedZone)
            }
            #expect(edit.kind == .refused)

            try await alice.revokeShares(of: ["shared"], in: alicesZone, from: bobUser)

            #expect(try await bob.fetchAll(in: bobsSharedZone).records.isEmpty)
            #expect(try await bob.shares(in: bobsSharedZone).isEmpty)
            #expect(try await alice.shares(in: alicesZone).isEmpty)
            #expect(try await Self.storedShares(relay).isEmpty)
            #expect(try await alice.fetchAll(in: alicesZone).records.map(\.id).sorted() == ["kept", "shared"])
        }
    }

    @Test func aUserCannotShareRevokeOrListAnotherUsersShares() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName, carolName) = (
                RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"), RelayTestServer.uniqueName("carol"))
            let (alice, bob) = (relay.client(aliceName), relay.client(bobName))
            let (bobUser, carolUser) = (try MirrorUser(name: bobName), try MirrorUser(name: carolName))
            let alicesZone = ZoneID.private("Todo", user: aliceName)
            try await alice.commit([Self.save("a", 1)], to: alicesZone)
            try await bob.commit([Self.save("b", 2)], to: .private("Todo", user: bobName))
            try await alice.share(["a"], in: alicesZone, with: bobUser, access: .readWrite)
            let before = try await Self.storedShares(relay)
            #expect(before == ["\(aliceName) a \(bobName) readWrite"])

            // Alice's zone, by bob: refused by the relay, naming bob and the zone's owner.
            let share = try await #require(throws: MirrorError.self) {
                try await bob.share(["a"], in: alicesZone, with: carolUser, access: .readWrite)
            }
            #expect(share.kind == .permissionDenied)
            #expect(share.message.contains("\(bobName) may not share records of"), "\(share.message)")
            #expect(!share.message.contains(RelayTestServer.relayRole), "\(share.message)")
            let revoke = try await #require(throws: MirrorError.self) {
                try await bob.revokeShares(of: ["a"], in: alicesZone, from: bobUser)
            }
            #expect(revoke.kind == .permissionDenied)
            let list = try await #require(throws: MirrorError.self) { try await bob.shares(in: alicesZone) }
            #expect(list.kind == .permissionDenied)
            let othersShared = try await #require(throws: MirrorError.self) {
                try await bob.shares(in: .shared("Todo", user: aliceName))
            }
            #expect(othersShared.kind == .permissionDenied)
            // Alice's record id, shared from bob's own zone: not his record, so not found.
            let notHis = try await #require(throws: MirrorError.self) {
                try await bob.share(["a"], in: .private("Todo", user: bobName), with: carolUser, access: .readOnly)
            }
            #expect(notHis.kind == .notFound)
            // Alice shares with herself: refused.
            let own = try await #require(throws: MirrorError.self) {
                try await alice.share(["a"], in: alicesZone, with: try MirrorUser(name: aliceName), access: .readOnly)
            }
            #expect(own.kind == .refused)
            // A public zone has no shares.
            let publicZone = try await #require(throws: MirrorError.self) {
                try await alice.share(["a"], in: .public("Todo"), with: bobUser, access: .readOnly)
            }
            #expect(publicZone.kind == .unsupported)

            #expect(try await Self.storedShares(relay) == before)
            #expect(try await alice.shares(in: alicesZone).map(\.recipient) == [bobUser])
        }
    }

    @Test func hostileShareBodiesGetAJSONErrorAndStoreNothing() async throws {
        try await RunningRelay.with { relay in
            let aliceName = RelayTestServer.uniqueName("alice")
            let alice = relay.client(aliceName)
            try await alice.commit([Self.save("a", 1)], to: .private("Todo", user: aliceName))
            let token = try await RelayTestServer.token(aliceName)
            let zone = "{\"scope\":\"private\",\"recordType\":\"Todo\",\"user\":\"\(aliceName)\"}"
            let cases: [(String, String, String, Int, String)] = [
                ("not JSON", "/v1/share", "{not json", 400, "badRequest"),
                ("no recipient", "/v1/share", "{\"zone\":\(zone),\"ids\":[\"a\"],\"access\":\"readOnly\"}", 400, "badRequest"),
                ("bad access", "/v1/share", "{\"zone\":\(zone),\"ids\":[\"a\"],\"recipient\":\"bob\",\"access\":\"owner\"}", 400, "badRequest"),
                ("bad recipient", "/v1/share", "{\"zone\":\(zone),\"ids\":[\"a\"],\"recipient\":\"\",\"access\":\"readOnly\"}", 400, "badRequest"),
                ("bad record id", "/v1/share", "{\"zone\":\(zone),\"ids\":[\"a/b\"],\"recipient\":\"bob\",\"access\":\"readOnly\"}", 400, "invalidName"),
                ("zone without a user", "/v1/share",
                    "{\"zone\":{\"scope\":\"private\",\"recordType\":\"Todo\"},\"ids\":[\"a\"],\"recipient\":\"bob\",\"access\":\"readOnly\"}",
                    400, "badRequest"),
                ("another user's zone", "/v1/share",
                    "{\"zone\":{\"scope\":\"private\",\"recordType\":\"Todo\",\"user\":\"someone\"},\"ids\":[\"a\"],\"recipient\":\"bob\",\"access\":\"readOnly\"}",
                    403, "permissionDenied"),
                ("revoke, wrong shape", "/v1/revoke", "{\"zone\":42}", 400, "badRequest"),
                ("shares, wrong shape", "/v1/shares", "[]", 400, "badRequest"),
            ]
            for (name, path, body, status, code) in cases {
                let answer = try await relay.send(path, body: Data(body.utf8), token: token)
                #expect(answer.status == status, "\(name)")
                #expect(RelayHostileInputTests.code(answer.body) == code, "\(name): \(String(decoding: answer.body, as: UTF8.self))")
            }
            let unsigned = try await relay.send("/v1/shares", body: Data("{\"zone\":\(zone)}".utf8), token: nil)
            #expect(unsigned.status == 401)
            #expect(try await Self.storedShares(relay).isEmpty)
        }
    }
}
