#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport

/// A `mirror-worker mirror` process: a `Mirror` of `Todo` records in another process, driven
/// by commands on its standard input, reporting its records on its standard output.
final class MirrorProcess: Sendable {
    /// A record as the worker prints it.
    struct Todo: Recordable, Hashable, Comparable, CustomStringConvertible {
        var id: String
        var title: String

        static func < (lhs: Todo, rhs: Todo) -> Bool { (lhs.id, lhs.title) < (rhs.id, rhs.title) }
        var description: String { "\(id):\(title)" }
    }

    let name: String
    let process: Subprocess
    /// Every line the worker printed.
    let lines = AsyncCollector<String>()

    /// Starts `mirror-worker <command> --db <directory>` with further `arguments`, and waits
    /// until its mirror is loaded. `command` is `mirror` or another that prints the same
    /// `ready`, `state`, `ok` and `error` lines (`versions`).
    init(
        _ name: String, command: String = "mirror", directory: TemporaryDirectory, _ arguments: [String] = []
    ) async throws {
        self.name = name
        let process = try Subprocess(
            try JSONFileTestSupport.workerExecutable(), [command, "--db", directory.path] + arguments,
            inheritStandardError: true, standardInput: true)
        self.process = process
        let lines = self.lines
        Task {
            for await line in process.lines { lines.append(line) }
            lines.finish()
        }
        try await lines.wait("\(name) to load its mirror") { lines in
            lines.contains { $0.hasPrefix("ready ") } && lines.contains { $0.hasPrefix("state ") }
        }
    }

    deinit {
        process.kill(SIGTERM)
    }

    /// The writer id of the worker's database.
    var writerID: String {
        lines.items.first { $0.hasPrefix("ready ") }.map { String($0.split(separator: " ")[1]) } ?? ""
    }

    /// Sends a command and waits until the worker applied it.
    ///
    /// - Throws: When the worker reports an error for it, or exits first.
    func send(_ command: String) async throws {
        let acknowledgement = "ok \(command)"
        let before = lines.items.count
        process.write(command + "\n")
        try await lines.wait("\(name) to apply \(command)") { lines in
            lines[before...].contains { $0 == acknowledgement || $0.hasPrefix("error ") }
        }
        if let error = lines.items[before...].first(where: { $0.hasPrefix("error ") }) {
            throw MirrorError(.invalidRecord, "\(name): \(command): \(error)")
        }
    }

    /// The worker's records, as it last printed them.
    var records: [Todo] { Self.latestRecords(in: lines.items) ?? [] }

    /// Waits until the worker's records satisfy `condition`.
    func waitForRecords(
        _ what: String, timeout: Duration = testTimeout, until condition: @escaping @Sendable ([Todo]) -> Bool
    ) async throws {
        try await lines.wait("\(name): \(what)", timeout: timeout) { lines in
            Self.latestRecords(in: lines).map(condition) ?? false
        }
    }

    /// Asks the worker to quit and waits for it to exit.
    ///
    /// - Returns: Its exit status (0 when all went well).
    @discardableResult
    func quit() async throws -> Int32 {
        process.write("quit\n")
        return try await process.wait(timeout: testTimeout).status
    }

    /// The records of the last `state` line.
    private static func latestRecords(in lines: [String]) -> [Todo]? {
        guard let line = lines.last(where: { $0.hasPrefix("state ") }) else { return nil }
        let json = line.split(separator: " ", maxSplits: 2).last.map(String.init) ?? "[]"
        return try? JSONDecoder().decode([Todo].self, from: Data(json.utf8))
    }
}
