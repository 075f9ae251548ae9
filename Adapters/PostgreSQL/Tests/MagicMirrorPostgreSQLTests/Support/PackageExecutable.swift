import Foundation
import MirrorTestSupport

/// The executables of this package the tests run as a user would (`mirror-todo-postgres`,
/// `pg-mirror-worker`), started with the root package's `Subprocess` (posix_spawn; never
/// Foundation's `Process`, which on Linux now and then loses a child's exit when many start
/// at once, and a test then waits forever).
enum PackageExecutable {
    /// The executable `name` beside the test bundle.
    static func url(_ name: String) -> URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent(name)
        return FileManager.default.fileExists(atPath: beside.path)
            ? beside : Bundle.main.bundleURL.appendingPathComponent(name)
    }

    /// Starts `name`; read its lines, stop it with SIGINT, or kill it.
    static func start(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Subprocess {
        try Subprocess(url(name), arguments, environment: environment)
    }

    /// Runs `name` to its end (killed after `timeout`); its status, output and errors.
    static func run(
        _ name: String, _ arguments: [String], environment: [String: String] = [:],
        timeout: Duration = .seconds(180)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let (termination, stdout, stderr) = try await Subprocess.run(
            url(name), arguments, environment: environment, timeout: timeout)
        return (termination.status, stdout.trimmingCharacters(in: .newlines), stderr.trimmingCharacters(in: .newlines))
    }
}
