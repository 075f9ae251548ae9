import Foundation
import MagicMirror
import MirrorTestSupport

/// A PostgreSQL cluster of one test's own, for tests that restart or kill the server, so
/// that the other tests, which share the server of `with-postgres.sh`, are not disturbed.
///
/// Driven by `Scripts/postgres-cluster.sh`; ``remove()`` stops it and deletes its directory.
struct OwnCluster: Sendable {
    let directory: String
    let port: Int
    /// The network namespace the server runs in (see ``HostNetwork``), or `nil` for this
    /// process's own network.
    var namespace: String? = nil

    /// The script beside this package's sources.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/postgres-cluster.sh").path

    /// Makes and starts a cluster in a new temporary directory.
    ///
    /// - Parameters:
    ///   - listen: The addresses the server listens on (comma separated), instead of
    ///     127.0.0.1; any client may then connect (trust authentication).
    ///   - namespace: The network namespace to run the server in.
    ///   - maxConnections: The server's `max_connections` (300 unless given).
    static func start(listen: String? = nil, namespace: String? = nil, maxConnections: Int? = nil) async throws -> OwnCluster {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("magicmirror-cluster-\(UUID().uuidString)").path
        var environment: [String: String] = [:]
        environment["LISTEN"] = listen
        environment["MAX_CONNECTIONS"] = maxConnections.map(String.init)
        let output = try await run(["start", directory], environment: environment, namespace: namespace)
        guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw MirrorError(.unavailable, "postgres-cluster.sh start printed \(output)")
        }
        return OwnCluster(directory: directory, port: port, namespace: namespace)
    }

    /// The superuser URL of a database of the cluster.
    func url(database: String = "postgres", host: String = "127.0.0.1") -> String {
        "postgres://mirror@\(host):\(port)/\(database)?sslmode=disable"
    }

    /// The superuser URL of a database of the cluster through its Unix socket, which
    /// reaches the server from any network namespace.
    func socketURL(database: String = "postgres") -> String {
        "postgres://mirror@localhost:\(port)/\(database)?host=\(directory)/sockets"
    }

    /// Stops the server (fast shutdown: clients are disconnected) and starts it again.
    func restart() async throws { _ = try await Self.run(["restart", directory], namespace: namespace) }
    /// Kills the server and its backends with SIGKILL, as a crash would.
    func kill() async throws { _ = try await Self.run(["kill", directory]) }
    /// Starts the server again after ``kill()``; crash recovery runs first.
    func startAgain() async throws { _ = try await Self.run(["start", directory], namespace: namespace) }
    /// Stops the server and deletes its directory.
    func remove() async { _ = try? await Self.run(["remove", directory]) }

    /// Runs the script (in `namespace`, if given) and returns what it printed; throws when
    /// it fails.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], namespace: String? = nil
    ) async throws -> String {
        var executable = URL(fileURLWithPath: "/bin/bash")
        var all = [script] + arguments
        if let namespace, let ip = HostNetwork.ip {
            all = ["netns", "exec", namespace, executable.path] + all
            executable = ip
        }
        // The server the script starts keeps no descriptor of ours (the script closes them),
        // so the pipes end with the script.
        let (termination, printed, errors) = try await Subprocess.run(
            executable, all, environment: environment, timeout: .seconds(180))
        guard termination == .exited(0) else {
            throw MirrorError(
                .unavailable, "postgres-cluster.sh \(arguments.joined(separator: " ")) \(termination): \(errors)")
        }
        return printed
    }
}

extension OwnCluster {
    /// Runs `body` with a cluster of its own, removed afterwards whatever happens.
    static func with<Result: Sendable>(
        listen: String? = nil, namespace: String? = nil, maxConnections: Int? = nil,
        _ body: (OwnCluster) async throws -> Result
    ) async throws -> Result {
        let cluster = try await start(listen: listen, namespace: namespace, maxConnections: maxConnections)
        do {
            let result = try await body(cluster)
            await cluster.remove()
            return result
        } catch {
            await cluster.remove()
            throw error
        }
    }
}
