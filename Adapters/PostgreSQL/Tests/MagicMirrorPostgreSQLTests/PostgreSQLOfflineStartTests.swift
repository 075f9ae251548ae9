import Foundation
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import Testing

/// An app that starts while the server is away: its replica opens at once over a
/// ``DeferredPostgreSQLDatabase``, says offline, keeps its changes, and pushes them once the
/// server is there.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLOfflineStartTests {
    @Test(.timeLimit(.minutes(5)))
    func aReplicaOpensOfflineAndPushesOnceTheServerStarts() async throws {
        try await OwnCluster.with { cluster in
            try await cluster.kill() // nothing listens on the port now
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("magicmirror-offline-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }

            let refused = await #expect(throws: MirrorError.self) {
                _ = try await PostgreSQLDatabase(url: cluster.url(), environment: [:])
            }
            #expect(refused?.message.contains("connection refused") == true, "\(String(describing: refused))")

            let remote = try DeferredPostgreSQLDatabase(url: cluster.url(), environment: [:])
            let replicated = ReplicatedDatabase(
                local: try JSONFileDatabase(directory: directory), remote: remote,
                retryDelay: .milliseconds(50), maximumRetryDelay: .seconds(1))
            let mirror = try await Mirror<SampleRecord>(database: replicated)
            try await replicated.statusUpdates.waitUntil(timeout: .seconds(30), "offline") { $0.phase == .offline }
            let failure = await #expect(throws: MirrorError.self) { try await remote.currentToken(in: .public("Any")) }
            #expect(failure?.kind == .unavailable)
            #expect(failure?.message.contains("not connected to the server yet") == true, "\(String(describing: failure))")

            mirror.dataModel.append(SampleRecord(title: "written offline"))
            try await mirror.flush() // in the replica
            #expect(replicated.status.pendingChanges == 1)

            try await cluster.startAgain()
            try await replicated.statusUpdates.waitUntil(timeout: .seconds(60), "online with nothing pending") {
                $0.phase == .online && $0.pendingChanges == 0
            }
            let server = try await PostgreSQLDatabase(url: cluster.url(), environment: [:])
            let stored = try await server.fetchAll(in: .public(SampleRecord.recordType)).records
            #expect(stored.count == 1)
            await server.close()
            await remote.close()
            withExtendedLifetime(mirror) {}
        }
    }
}
