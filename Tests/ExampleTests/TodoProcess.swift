import Foundation
import MirrorTestSupport
import Testing

/// The built `mirror-todo`, run as a user would.
enum Todo {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var executable: URL { BuiltProducts.executable("mirror-todo") }

    /// Runs one command to its end.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        let (termination, stdout, stderr) = try await Subprocess.run(
            executable, arguments, environment: environment)
        return Result(
            status: termination.status,
            stdout: stdout.trimmingCharacters(in: .newlines),
            stderr: stderr.trimmingCharacters(in: .newlines))
    }

    /// The list as `--json list` prints it.
    static func list(_ db: TemporaryFolder, extra: [String] = []) async throws -> [[String: Any]] {
        let result = try await run(["--db", db.path, "--json"] + extra + ["list"])
        guard result.status == 0 else { throw SubprocessError("list failed: \(result.stderr)") }
        guard let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] else {
            throw SubprocessError("list printed \(result.stdout)")
        }
        return list
    }

    /// Starts a long-running command (`watch`).
    static func start(_ arguments: [String]) throws -> Subprocess {
        try Subprocess(executable, arguments)
    }
}

extension Subprocess {
    /// The next line of standard output, as a JSON object.
    func nextObject(timeout: Duration = .seconds(60)) async throws -> [String: Any] {
        let line = try await nextLine(timeout: timeout)
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw SubprocessError("not a JSON object: \(line)")
        }
        return object
    }

    /// Interrupts the process as Ctrl-C would and waits for it to end.
    func stop() async throws {
        kill(SIGINT)
        try await wait(timeout: .seconds(60))
    }
}

/// A temporary directory removed by `remove()`.
struct TemporaryFolder {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("mirror-todo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    var path: String { url.path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}
