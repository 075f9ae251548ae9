import Foundation
import MirrorTestSupport

/// A PostgreSQL server of one test's own, for tests that kill it, so that the other tests,
/// which share the server of `with-postgres.sh`, are not disturbed. Driven by
/// `Adapters/PostgreSQL/Scripts/postgres-cluster.sh` (as the adapter's tests' `OwnCluster`,
/// which a test target of this package cannot import).
struct RelayCluster: Sendable {
    let directory: String
    let port: Int

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Adapters/PostgreSQL/Scripts/postgres-cluster.sh").path

    /// The superuser's URL of the server's `postgres` database.
    var adminURL: String { "postgres://mirror@127.0.0.1:\(port)/postgres" }

    /// Kills the server and its backends with SIGKILL, as a crash would.
    func kill() async throws { _ = try await Self.run(["kill", directory]) }
    /// Starts the server again after ``kill()``; crash recovery runs first.
    func startAgain() async throws { _ = try await Self.run(["start", directory]) }

    /// Runs `body` with a new server, removed afterwards whatever happens.
    static func with<Result: Sendable>(_ body: (RelayCluster) async throws -> Result) async throws -> Result {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-cluster-" + UUID().uuidString).path
        let cluster: RelayCluster
        do {
            let output = try await run(["start", directory])
            guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw SubprocessError("postgres-cluster.sh start printed \(output)")
            }
            cluster = RelayCluster(directory: directory, port: port)
        } catch {
            _ = try? await run(["remove", directory])
            throw error
        }
        do {
            let result = try await body(cluster)
            _ = try? await run(["remove", directory])
            return result
        } catch {
            _ = try? await run(["remove", directory])
            throw error
        }
    }

    /// Runs the script; what it printed. The server it starts keeps no descriptor of ours
    /// (the script closes them), so the pipes end with the script.
    private static func run(_ arguments: [String]) async throws -> String {
        let run = try await Subprocess.run(URL(fileURLWithPath: "/bin/bash"), [script] + arguments, timeout: .seconds(300))
        guard run.termination == .exited(0) else {
            throw SubprocessError("postgres-cluster.sh \(arguments.joined(separator: " ")) \(run.termination): \(run.standardError)")
        }
        return run.standardOutput
    }
}
