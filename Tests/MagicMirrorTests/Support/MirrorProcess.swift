#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror

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
    let process: Process
    private let input: FileHandle
    /// Every line the worker printed.
    let lines = AsyncCollector<String>()
    /// The worker's exit status, once it exited.
    private let exit = AsyncCollector<Int32>()

    /// Starts `mirror-worker mirror --db <directory>` with further `arguments`, and waits
    /// until its mirror is loaded.
    init(_ name: String, directory: TemporaryDirectory, _ arguments: [String] = []) async throws {
        self.name = name
        let process = Process()
        process.executableURL = try JSONFileTestSupport.workerExecutable()
        process.arguments = ["mirror", "--db", directory.path] + arguments
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.standardError
        let lines = self.lines
        let buffer = MutexBox<[UInt8]>([])
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                lines.finish()
                return
            }
            var complete: [String] = []
            buffer.update { buffer in
                buffer.append(contentsOf: data)
                while let newline = buffer.firstIndex(of: 0x0A) {
                    complete.append(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                }
            }
            for line in complete { lines.append(line) }
        }
        let exit = self.exit
        process.terminationHandler = { process in exit.append(process.terminationStatus) }
        self.process = process
        self.input = input.fileHandleForWriting
        try process.run()
        try await lines.wait("\(name) to load its mirror") { lines in
            lines.contains { $0.hasPrefix("ready ") } && lines.contains { $0.hasPrefix("state ") }
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
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
        input.write(Data((command + "\n").utf8))
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
        input.write(Data("quit\n".utf8))
        try await exit.wait(forCount: 1, "\(name) to exit")
        return exit.items[0]
    }

    /// The records of the last `state` line.
    private static func latestRecords(in lines: [String]) -> [Todo]? {
        guard let line = lines.last(where: { $0.hasPrefix("state ") }) else { return nil }
        let json = line.split(separator: " ", maxSplits: 2).last.map(String.init) ?? "[]"
        return try? JSONDecoder().decode([Todo].self, from: Data(json.utf8))
    }
}
