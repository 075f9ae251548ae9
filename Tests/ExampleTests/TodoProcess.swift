import Foundation
import Synchronization
import Testing

/// The built `mirror-todo`, run as a user would.
enum Todo {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var executable: URL {
        #if os(Linux)
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        #else
        let directory = Bundle.main.bundleURL.deletingLastPathComponent()
        #endif
        return directory.appendingPathComponent("mirror-todo")
    }

    /// Runs one command to its end.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: stdout, as: UTF8.self).trimmingCharacters(in: .newlines),
            stderr: String(decoding: stderr, as: UTF8.self).trimmingCharacters(in: .newlines))
    }

    /// The list as `--json list` prints it.
    static func list(_ db: TemporaryFolder, extra: [String] = []) throws -> [[String: Any]] {
        let result = try run(["--db", db.path, "--json"] + extra + ["list"])
        guard result.status == 0 else { throw TodoTestError("list failed: \(result.stderr)") }
        guard let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] else {
            throw TodoTestError("list printed \(result.stdout)")
        }
        return list
    }

    /// Starts a long-running command (`watch`).
    static func start(_ arguments: [String]) throws -> RunningTodo {
        try RunningTodo(arguments)
    }
}

/// A `mirror-todo` that keeps running; its output lines arrive on streams.
final class RunningTodo: Sendable {
    private let process: Process
    private let lines: AsyncStream<String>
    private let errorText: TextBuffer
    private let errorChanged: AsyncStream<Void>

    init(_ arguments: [String]) throws {
        process = Process()
        process.executableURL = Todo.executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let (lines, lineSink) = AsyncStream.makeStream(of: String.self)
        let (errorChanged, errorSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.lines = lines
        self.errorChanged = errorChanged
        let buffer = Mutex(Data())
        out.fileHandleForReading.readabilityHandler = { handle in
            let chunk = handle.availableData
            if chunk.isEmpty {
                handle.readabilityHandler = nil
                lineSink.finish()
                return
            }
            let complete: [String] = buffer.withLock { buffer in
                buffer.append(chunk)
                var found: [String] = []
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    found.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                return found
            }
            for line in complete { lineSink.yield(line) }
        }
        let errorText = TextBuffer()
        self.errorText = errorText
        err.fileHandleForReading.readabilityHandler = { handle in
            let chunk = handle.availableData
            if chunk.isEmpty {
                handle.readabilityHandler = nil
                errorSink.finish()
                return
            }
            errorText.append(String(decoding: chunk, as: UTF8.self))
            errorSink.yield()
        }
        try process.run()
    }

    /// Waits until the process wrote `text` to standard error.
    func waitForStandardError(containing text: String, timeout: Duration) async throws {
        try await withTimeout(timeout, "standard error never contained \(text.debugDescription)") {
            if self.errorText.text.contains(text) { return }
            for await _ in self.errorChanged where self.errorText.text.contains(text) { return }
            throw TodoTestError("the process ended; standard error: \(self.errorText.text)")
        }
    }

    /// The next line of standard output.
    func nextLine(timeout: Duration) async throws -> String {
        try await withTimeout(timeout, "no line on standard output; standard error: \(errorText.text)") {
            for await line in self.lines { return line }
            throw TodoTestError("the process ended; standard error: \(self.errorText.text)")
        }
    }

    func stop() {
        if process.isRunning { process.interrupt() }
        process.waitUntilExit()
    }
}

struct TodoTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with `message` when it takes longer than `timeout`.
func withTimeout<T: Sendable>(
    _ timeout: Duration, _ message: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TodoTestError("timed out after \(timeout): \(message)")
        }
        return value
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

/// Text collected from another thread.
final class TextBuffer: Sendable {
    private let storage = Mutex("")
    var text: String { storage.withLock { $0 } }
    func append(_ more: String) { storage.withLock { $0 += more } }
}
