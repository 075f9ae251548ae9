import Foundation
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import MagicMirrorRelay
import Testing

/// The adapter's sharing, asset and delete-rule paths, called as the relay calls them (the
/// relay's own role, acting for a user with `PostgreSQLActingUser`): each runs as the user,
/// never as the relay's role, so row-level security refuses bob what is alice's and grants
/// alice what is hers.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayActingUserTests {
    @Test func revokeAssetsAndRulesRunAsTheUserTheRelayActsFor() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let (alice, bob) = (relay.client(aliceName), relay.client(bobName))
            let bobUser = try MirrorUser(name: bobName)
            let alicesZone = ZoneID.private("Todo", user: aliceName)
            try await bob.commit([RelaySharingTests.save("b", 1)], to: .private("Todo", user: bobName))
            try await alice.commit([RelaySharingTests.save("a", 1)], to: alicesZone)
            try await alice.share(["a"], in: alicesZone, with: bobUser, access: .readOnly)

            // The relay's own role, as the relay connects.
            let database = try await PostgreSQLDatabase(
                url: RelayTestServer.url(database: relay.database, role: RelayTestServer.relayRole), environment: [:])
            let (asAlice, asBob) = (PostgreSQLActingUser(role: aliceName), PostgreSQLActingUser(role: bobName))
            let rules = [StoredDeleteRule(referringType: "Todo", field: "parent", cardinality: .optional, targetType: "Todo", action: .nullify)]
            let storedRules = "SELECT owner || ' ' || field FROM magicmirror.delete_rules"
            let storedAssets = "SELECT owner || ' ' || size FROM magicmirror.assets"
            do {
                // Acting for bob: refused, or nothing of alice's is touched.
                try await PostgreSQLActingUser.$current.withValue(asBob) {
                    try await database.revokeShares(of: ["a"], in: alicesZone, from: bobUser)
                }
                #expect(try await RelaySharingTests.storedShares(relay) == ["\(aliceName) a \(bobName) readOnly"])
                let rule = try await #require(throws: MirrorError.self) {
                    try await PostgreSQLActingUser.$current.withValue(asBob) {
                        try await database.registerDeleteRules(rules, referringType: "Todo", in: alicesZone)
                    }
                }
                #expect(rule.kind == .permissionDenied)
                let asset = try await #require(throws: MirrorError.self) {
                    try await PostgreSQLActingUser.$current.withValue(asBob) {
                        try await database.storeAsset(Data("bob's".utf8), in: alicesZone)
                    }
                }
                #expect(asset.kind == .permissionDenied)
                #expect(try await RelayTestServer.admin(storedRules, database: relay.database).isEmpty)
                #expect(try await RelayTestServer.admin(storedAssets, database: relay.database).isEmpty)

                // Acting for alice: her own zone's shares, rules and assets are hers to change
                // (each path on its own: one that ran as the relay's role fails alone).
                await #expect(throws: Never.self, "the delete rules") {
                    try await PostgreSQLActingUser.$current.withValue(asAlice) {
                        try await database.registerDeleteRules(rules, referringType: "Todo", in: alicesZone)
                    }
                }
                await #expect(throws: Never.self, "the asset") {
                    try await PostgreSQLActingUser.$current.withValue(asAlice) {
                        _ = try await database.storeAsset(Data("alice's".utf8), in: alicesZone)
                    }
                }
                try await PostgreSQLActingUser.$current.withValue(asAlice) {
                    try await database.revokeShares(of: ["a"], in: alicesZone, from: bobUser)
                }
                #expect(try await RelayTestServer.admin(storedRules, database: relay.database) == ["\(aliceName) parent"])
                #expect(try await RelayTestServer.admin(storedAssets, database: relay.database) == ["\(aliceName) 7"])
                #expect(try await RelaySharingTests.storedShares(relay).isEmpty)
            } catch {
                await database.close()
                throw error
            }
            await database.close()
        }
    }
}
