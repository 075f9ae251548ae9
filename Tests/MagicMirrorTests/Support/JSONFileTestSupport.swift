#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import Synchronization
import Testing

/// Helpers of the JSON-file database tests: the `mirror-worker` process, error
/// notifications, and reading the files as `jq` would.
enum JSONFileTestSupport {
    /// The `mirror-worker` executable, built next to the test bundle.
    static func workerExecutable() throws -> URL {
        var candidates: [URL] = []
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: path).deletingLastPathComponent())
        }
        #endif
        for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
            candidates.append(bundle.bundleURL.deletingLastPathComponent())
        }
        if let executable = Bundle.main.executableURL {
            candidates.append(executable.deletingLastPathComponent())
        }
        for directory in candidates {
            let worker = directory.appendingPathComponent("mirror-worker")
            if FileManager.default.isExecutableFile(atPath: worker.path) { return worker }
        }
        throw MirrorError(.notFound, "mirror-worker not found next to the tests in \(candidates.map(\.path))")
    }

    /// Parses every line of an NDJSON file with `JSONSerialization`, as `jq` would.
    static func jsonLines(_ url: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: url, encoding: .utf8)
        return try text.split(separator: "\n", omittingEmptySubsequences: true).map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "not an object: \(line)")
        }
    }

    /// Parses a whole JSON file.
    static func jsonObject(_ url: URL) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        return try #require(object as? [String: Any])
    }

    /// A file's permission bits.
    static func mode(_ url: URL) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return try #require(attributes[.posixPermissions] as? Int)
    }

    /// The names in a directory, sorted.
    static func names(in url: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }

    /// The current journal of a zone directory.
    static func journal(in zoneDirectory: URL) throws -> URL {
        let name = try #require(names(in: zoneDirectory).last { $0.hasPrefix("journal-") })
        return zoneDirectory.appendingPathComponent(name)
    }

    /// Appends raw bytes to a file.
    static func append(_ bytes: some Sequence<UInt8>, to url: URL) throws {
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
    }
}

/// A save of a small JSON object, timestamped now.
func jsonSave(_ id: String, _ object: [String: any Sendable], base: Int = 0) -> RecordOperation {
    .save(id, fields: fields(object), baseVersion: base, timestamp: HybridLogicalClock.shared.now())
}

/// A deletion, timestamped now.
func jsonDelete(_ id: String, base: Int) -> RecordOperation {
    .delete(id, baseVersion: base, timestamp: HybridLogicalClock.shared.now())
}

/// Collects the `.mirrorError` notifications about files under one directory, so tests
/// running in parallel do not see each other's.
///
/// `@unchecked Sendable`: `token` is set once in `init` and only read afterwards; the
/// collected errors live behind a `Mutex`.
final class MirrorErrorCollector: @unchecked Sendable {
    private final class Storage: Sendable {
        let errors = Mutex<[MirrorError]>([])
    }

    private let storage = Storage()
    private var token: (any NSObjectProtocol)?

    init(under directory: URL) {
        let prefixes = [directory.resolvingSymlinksInPath().path, directory.path]
        let storage = storage
        token = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) { notification in
            guard let error = notification.object as? MirrorError, let file = error.file,
                  prefixes.contains(where: { file.hasPrefix($0) })
            else { return }
            storage.errors.withLock { $0.append(error) }
        }
    }

    /// Every error posted so far.
    var all: [MirrorError] { storage.errors.withLock { $0 } }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }
}

/// A `mirror-worker` process whose standard output is read line by line.
final class WorkerProcess: Sendable {
    let process: Process
    /// The lines the worker printed, in order.
    let lines: AsyncStream<String>
    private let exited: AsyncStream<Int32>
    /// The worker's standard input, when it was started with `input: true`.
    private let input: FileHandle?

    /// Starts `mirror-worker` with `arguments`.
    ///
    /// - Parameters:
    ///   - launcher: A command that runs the worker (for example `setpriv` and its options
    ///     to run it as another user); the worker's path and `arguments` follow it.
    ///   - input: Whether to give the worker a standard input that ``send(_:)`` writes to.
    init(_ arguments: [String], launcher: [String] = [], input: Bool = false) throws {
        let process = Process()
        let worker = try JSONFileTestSupport.workerExecutable()
        if let command = launcher.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = Array(launcher.dropFirst()) + [worker.path] + arguments
        } else {
            process.executableURL = worker
            process.arguments = arguments
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        if input {
            let pipe = Pipe()
            process.standardInput = pipe
            self.input = pipe.fileHandleForWriting
        } else {
            self.input = nil
        }
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        let (exited, exitContinuation) = AsyncStream.makeStream(of: Int32.self)
        // A thread of its own reads the output with blocking reads until the end of file:
        // `readabilityHandler` sometimes never reports the end on Linux, which left tests
        // waiting for the last lines forever.
        let reader = Thread {
            let fd = output.fileHandleForReading.fileDescriptor
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            var buffer: [UInt8] = []
            while true {
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                buffer.append(contentsOf: chunk[..<count])
                var start = 0
                while let newline = buffer[start...].firstIndex(of: 0x0A) {
                    continuation.yield(String(decoding: buffer[start..<newline], as: UTF8.self))
                    start = newline + 1
                }
                buffer.removeFirst(start)
            }
            continuation.finish()
        }
        process.terminationHandler = { process in
            exitContinuation.yield(process.terminationStatus)
            exitContinuation.finish()
        }
        self.process = process
        self.lines = lines
        self.exited = exited
        try process.run()
        reader.start()
    }

    /// Writes `line` and a line feed to the worker's standard input.
    func send(_ line: String) throws {
        guard let input else { throw MirrorError(.notFound, "the worker was started without a standard input") }
        try input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Kills the worker with SIGKILL.
    func kill() {
        _ = sendSignal(process.processIdentifier, SIGKILL)
    }

    /// Waits for the worker to exit and returns its status.
    func waitForExit(within timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await firstValue(of: exited, within: timeout)
    }
}

#if canImport(Glibc)
private func sendSignal(_ pid: Int32, _ signal: Int32) -> Int32 { Glibc.kill(pid, signal) }
#elseif canImport(Darwin)
private func sendSignal(_ pid: Int32, _ signal: Int32) -> Int32 { Darwin.kill(pid, signal) }
#endif

/// A value behind a lock, for handlers that collect what they see.
final class MutexBox<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) { storage = Mutex(value) }

    var value: Value { storage.withLock { $0 } }

    func update(_ body: (inout Value) -> Void) { storage.withLock { body(&$0) } }
}

extension MutexBox where Value == [String] {
    func append(contentsOf elements: [String]) { update { $0.append(contentsOf: elements) } }
}

