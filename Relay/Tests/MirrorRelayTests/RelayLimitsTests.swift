import Foundation
import MagicMirror
import MirrorTestSupport
@_spi(RelayProtocol) import MagicMirrorRelay
import Testing

/// Limits a stranger's requests could pass by sending them at once, and whom a share may
/// name (findings of the attack on the relay).
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayLimitsTests {
    /// Polls sent at once count their zones against the user's 1,024 from the moment each
    /// is accepted: eight polls of 256 zones each, at once, watch at most 1,024 zones.
    @Test func watchesSentAtOnceStayWithinTheUsersZones() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(subject)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for session in 0..<8 {
                    group.addTask {
                        let zones = (0..<256).map {
                            RelayWire.ZoneToken(zone: .private("T\(session)x\($0)", user: subject), token: .initial)
                        }
                        let body = try JSONEncoder().encode(RelayWire.WatchRequest(session: "s\(session)", zones: zones))
                        return try await relay.send("/v1/watch", body: body, token: token).status
                    }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.filter { $0 == 200 }.count <= 4, "\(statuses)")
            #expect(statuses.filter { $0 == 429 }.count >= 4, "\(statuses)")
        }
    }

    /// A provision that cannot finish now (another transaction holds the subject's row, past
    /// the relay's lock timeout) is a 503 to send again, not a refusal of the user; and an
    /// advisory lock, which any role of the cluster may take, holds no user out.
    @Test func aProvisionThatWaitsTooLongIsToldToTryAgain() async throws {
        try await RunningRelay.with { relay in
            let (stranger, waiting) = (RelayTestServer.uniqueName("user"), RelayTestServer.uniqueName("user"))
            let psql = try Subprocess(
                URL(fileURLWithPath: "/usr/bin/psql"),
                [RelayTestServer.url(database: relay.database), "-v", "ON_ERROR_STOP=1", "-q", "-t", "-A"], standardInput: true)
            defer { psql.kill() }
            // The advisory lock an earlier provision took, held by another session.
            psql.write("SELECT pg_advisory_lock(hashtext('magicmirror_relay.provision'), hashtext('\(stranger)'))::text;\n")
            #expect(try await psql.nextLine(timeout: .seconds(60)) == "")
            _ = try await relay.client(stranger).currentToken(in: .private("Todo", user: stranger))
            // The subject's row, written in a transaction that stays open.
            psql.write("BEGIN;\nINSERT INTO magicmirror_relay.users (subject) VALUES ('\(waiting)');\nSELECT 'held';\n")
            #expect(try await psql.nextLine(timeout: .seconds(60)) == "held")
            let client = relay.client(waiting)
            let error = try await #require(throws: MirrorError.self) {
                _ = try await client.currentToken(in: .private("Todo", user: waiting))
            }
            #expect(error.kind == .unavailable, "\(error)")
            #expect(error.message.contains("could not provision this user now"), "\(error.message)")
            psql.write("ROLLBACK;\n")
            psql.closeInput()
            #expect(try await psql.wait(timeout: .seconds(60)) == .exited(0))
            _ = try await client.currentToken(in: .private("Todo", user: waiting))
            #expect(try await relay.admin("SELECT subject FROM magicmirror_relay.users ORDER BY subject") == [stranger, waiting].sorted())
        }
    }

    /// A share names a user of the relay: not its own role, the server's roles, or a name
    /// nobody used, and the answer is the same for a role that exists and one that does not.
    @Test func aShareNamesAUserOfTheRelayOnly() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let (alice, bob) = (relay.client(aliceName), relay.client(bobName))
            let zone = ZoneID.private("Todo", user: aliceName)
            try await alice.commit([.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000, counter: 0))], to: zone)
            for stranger in [RelayTestServer.relayRole, RelayTestServer.adminRole, "pg_monitor", "nobody_ever_\(bobName)"] {
                let error = try await #require(throws: MirrorError.self, "\(stranger)") {
                    try await alice.share(["a"], in: zone, with: try MirrorUser(name: stranger), access: .readOnly)
                }
                #expect(error.kind == .notFound, "\(stranger)")
                #expect(error.message.contains("is no user of this relay"), "\(stranger): \(error.message)")
            }
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.shares") == ["0"])
            // Bob has used the relay: he may be named.
            _ = try await bob.currentToken(in: .shared("Todo", user: bobName))
            try await alice.share(["a"], in: zone, with: try MirrorUser(name: bobName), access: .readOnly)
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.shares") == ["1"])
        }
    }
}
