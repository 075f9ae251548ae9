import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import Testing

/// Several real processes (`pg-mirror-worker`) mirroring one zone through the server.
@Suite(.enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLProcessTests {
    @Test func processesConvergeAndSeeEachChangeOnce() async throws {
        try await TestServer.withDatabase { name, opened in
            // The schema exists before the workers race to open the database.
            _ = try await opened.open(TestServer.url(database: name))
            let results = try await runWorkers(url: TestServer.url(database: name), count: 20)
            for result in results {
                #expect(result.contains(#""converged":true"#), "\(result)")
                #expect(result.contains(#""duplicateEvents":0"#), "\(result)")
            }
        }
    }

    @Test(.disabled("passes alone, but hangs some workers when run beside the other suites; under investigation"))
    func restartsAndSIGKILLInTheMiddleOfCommitsLoseNothing() async throws {
        try await OwnCluster.with { cluster in
            let opened = OpenedDatabases()
            _ = try await opened.open(cluster.url())
            let results = try await runWorkers(url: cluster.url(), count: 40) {
                try await cluster.restart()
                try await cluster.kill()
                try await cluster.startAgain()
            }
            for database in opened.all { await database.close() }
            for result in results {
                #expect(result.contains(#""converged":true"#), "\(result)")
            }
        }
    }

    /// Starts three workers, runs `meanwhile` (if any) while they work, and returns each
    /// worker's output line once all have exited.
    private func runWorkers(
        url: String, count: Int, meanwhile: (@Sendable () async throws -> Void)? = nil
    ) async throws -> [String] {
        let names = ["a", "b", "c"]
        return try await withThrowingTaskGroup(of: String.self) { group in
            for worker in names {
                group.addTask {
                    let (status, output, errors) = try await PackageExecutable.run(
                        "pg-mirror-worker", [url, worker, String(count), names.joined(separator: ",")],
                        timeout: .seconds(300))
                    return status == 0 ? output : "\(output) (status \(status)) \(errors)"
                }
            }
            if let meanwhile { try await meanwhile() }
            var outputs: [String] = []
            for try await output in group { outputs.append(output) }
            return outputs
        }
    }
}
