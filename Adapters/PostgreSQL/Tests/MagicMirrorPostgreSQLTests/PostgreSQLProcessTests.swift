import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import Testing

/// Several real processes (`pg-mirror-worker`) mirroring one zone through the server.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
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

    /// The server restarted, then killed with SIGKILL and started again, while three
    /// processes commit: each worker's commits made before and during the outages are
    /// committed once the server is back (a worker's `waitUntilCommitted` covers its
    /// acknowledged and pending changes), and every mirror converges on every worker's
    /// final state, which the server holds too.
    @Test func restartsAndSIGKILLInTheMiddleOfCommitsLoseNothing() async throws {
        try await OwnCluster.with { cluster in
            let opened = OpenedDatabases()
            _ = try await opened.open(cluster.url())
            let results = try await runWorkers(url: cluster.url(), count: 40) {
                try await cluster.restart()
                try await cluster.kill()
                try await cluster.startAgain()
            }
            for result in results {
                #expect(result.contains(#""converged":true"#), "\(result)")
            }
            // What the server holds: every worker's odd items, edited; no acknowledged commit lost.
            let expected = Set(["a", "b", "c"].flatMap { worker in
                (0..<40).filter { $0 % 2 == 1 }.map { "\(worker)-\($0)" }
            })
            let stored = try await opened.open(cluster.url()).fetchAll(in: .public("Item")).records
            #expect(Set(stored.map(\.id)) == expected)
            #expect(stored.allSatisfy { $0.fields.map { String(decoding: $0, as: UTF8.self).contains("\"value\":1") } == true })
            for database in opened.all { await database.close() }
        }
    }

    /// More processes than the server has connections for their pools: each needs one
    /// connection, its listening one, which serves its commits and reads while the server
    /// refuses the pool more (as 90 processes on a server of PostgreSQL's default 100
    /// connections do, here scaled down: 10 processes, 12 connections, a pool of 2 each).
    @Test func processesOutnumberingTheServersConnectionsConverge() async throws {
        try await OwnCluster.with(maxConnections: 12) { cluster in
            let opened = OpenedDatabases()
            _ = try await opened.open(cluster.url())
            for database in opened.all { await database.close() }
            let names = (1...10).map { "p\($0)" }
            let results = try await runWorkers(url: cluster.url(), count: 4, names: names)
            for result in results {
                #expect(result.contains(#""converged":true"#), "\(result)")
            }
        }
    }

    /// Starts the workers `names`, runs `meanwhile` (if any) while they work, and returns
    /// each worker's output line once all have exited.
    private func runWorkers(
        url: String, count: Int, names: [String] = ["a", "b", "c"],
        meanwhile: (@Sendable () async throws -> Void)? = nil
    ) async throws -> [String] {
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
