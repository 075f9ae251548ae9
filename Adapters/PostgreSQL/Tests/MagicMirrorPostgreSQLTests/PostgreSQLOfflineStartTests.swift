import Foundation
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTestSupport
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

    /// The same with real processes: an app starts while the server is away, edits, is
    /// SIGKILLed, starts offline again from its replica and edits more; once the server is
    /// up, every edit of both runs reaches the server and a mirror of it.
    @Test(.timeLimit(.minutes(8)))
    func anAppKilledWhileOfflineConvergesOnceTheServerStarts() async throws {
        try await OwnCluster.with { cluster in
            try await cluster.kill()
            let replica = FileManager.default.temporaryDirectory
                .appendingPathComponent("magicmirror-offline-process-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: replica) }
            func startApp() async throws -> NoteWorker {
                let process = try Subprocess(
                    PackageExecutable.url("pg-mirror-worker"),
                    ["--offline-first", cluster.url(), replica.path], standardInput: true)
                let app = NoteWorker(name: "offline app", process: process)
                _ = try await app.ready()
                return app
            }

            let first = try await startApp()
            defer { first.process.kill() }
            #expect(try await first.send("status").hasPrefix("ok offline"))
            try await first.send("append n1")
            try await first.send("set n1 title before-kill")
            try await first.send("flush") // in the replica's journal and outbox
            first.process.kill()
            _ = try await first.process.wait(timeout: .seconds(60))

            let second = try await startApp()
            defer { second.process.kill() }
            try await second.waitFor([PostgreSQLTwoHostsTests.Note(id: "n1", title: "before-kill")])
            try await second.send("append n2")
            try await second.send("set n2 count 2")
            try await second.send("flush")
            let status = try await second.send("status").split(separator: " ")
            #expect(status.count == 3 && status[1] == "offline" && (Int(status[2]) ?? 0) >= 2, "\(status)")

            try await cluster.startAgain()
            try await second.send("pushed")
            let expected = [
                PostgreSQLTwoHostsTests.Note(id: "n1", title: "before-kill"),
                PostgreSQLTwoHostsTests.Note(id: "n2", count: 2),
            ]
            let reader = NoteWorker(
                name: "reader",
                process: try Subprocess(
                    PackageExecutable.url("pg-mirror-worker"), ["--interactive", cluster.url()], standardInput: true))
            defer { reader.process.kill() }
            _ = try await reader.ready()
            try await reader.waitFor(expected)
            let server = try await PostgreSQLDatabase(url: cluster.url(), environment: [:])
            let stored = try await server.fetchAll(in: .public("Note")).records
            #expect(stored.map(\.id).sorted() == ["n1", "n2"])
            await server.close()
        }
    }
}
