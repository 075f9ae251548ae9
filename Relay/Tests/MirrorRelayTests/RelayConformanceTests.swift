import Foundation
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import MagicMirrorRelay
import MirrorTesting
import Testing

/// The public ``RecordDatabaseConformance`` suite on `RelayDatabase`, through a real relay
/// on a fresh database for each check.
///
/// One check is left out: "zones are independent" commits to two users' private zones with
/// one database, which a relay refuses by design (a token names one user);
/// `RelayAccessTests` checks the same separation with two users. The check of NFC names
/// writes the private zone of the user `café`: it runs as that user.
@Suite(.timeLimit(.minutes(10)), .serialized, .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayConformanceTests {
    static let checks = RecordDatabaseConformance.checks.filter { $0.name != "zones are independent" }

    @Test func oneCheckIsLeftOut() {
        #expect(RecordDatabaseConformance.checks.count - Self.checks.count == 1)
    }

    @Test(arguments: checks)
    func conforms(to check: ConformanceCheck) async throws {
        let subject = check.name.contains("NFC") ? "caf\u{e9}" : RelayTestServer.uniqueName("user")
        try await check.run {
            let relay = try await RunningRelay.start()
            return DatabaseUnderTest(
                database: relay.client(subject),
                otherWriter: { relay.client(subject) },
                startNewGeneration: { zone in
                    let admin = try await PostgreSQLDatabase(url: RelayTestServer.url(database: relay.database), environment: [:])
                    try await admin.compactHistory(of: zone)
                    await admin.close()
                },
                cleanup: { await relay.stop() })
        }
    }
}
