#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorTestSupport
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

    /// Parses every line of an NDJSON file with `JSONSerialization`, as `jq` would (which
    /// skips white space between values, such as a journal's reserved tail).
    static func jsonLines(_ url: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: url, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            .filter { !$0.allSatisfy { $0 == " " || $0 == "\t" || $0 == "\r" } }
        return try lines.map { line in
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

    /// A journal's bytes without the spaces a writer reserved at its end: its data.
    static func journalData(_ url: URL) throws -> Data {
        var data = try Data(contentsOf: url)
        while data.last == UInt8(ascii: " ") { data.removeLast() }
        return data
    }

    /// A journal's text without the spaces a writer reserved at its end.
    static func journalText(_ url: URL) throws -> String {
        String(decoding: try journalData(url), as: UTF8.self)
    }

    /// A journal line without its append's checksum (`prior` and `sum`), as a program that
    /// does not know checksums writes one.
    static func unsealed(_ line: String) -> String {
        line.replacingOccurrences(of: #","prior":[0-9]+,"sum":"[0-9a-f]{16}""#, with: "", options: .regularExpression)
    }

    /// Writes raw bytes where a file's data ends, as a writer appends to a journal: over
    /// the spaces reserved at its end, if it has them, else at its end.
    static func append(_ bytes: some Sequence<UInt8>, to url: URL) throws {
        let end = try journalData(url).count
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(end))
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
    let process: Subprocess
    /// The lines the worker printed, in order.
    var lines: AsyncStream<String> { process.lines }

    /// Starts `mirror-worker` with `arguments`; its standard error goes to the test's.
    ///
    /// - Parameters:
    ///   - launcher: A command that runs the worker (for example `setpriv` and its options
    ///     to run it as another user); the worker's path and `arguments` follow it.
    ///   - input: Whether to give the worker a standard input that ``send(_:)`` writes to.
    init(_ arguments: [String], launcher: [String] = [], input: Bool = false) throws {
        let worker = try JSONFileTestSupport.workerExecutable()
        if let command = launcher.first {
            process = try Subprocess(
                URL(fileURLWithPath: command), Array(launcher.dropFirst()) + [worker.path] + arguments,
                inheritStandardError: true, standardInput: input)
        } else {
            process = try Subprocess(worker, arguments, inheritStandardError: true, standardInput: input)
        }
    }

    /// Writes `line` and a line feed to the worker's standard input.
    func send(_ line: String) throws {
        process.write(line + "\n")
    }

    /// Kills the worker with SIGKILL.
    func kill() { process.kill() }

    /// Waits for the worker to exit and returns its status (128 + signal when killed).
    func waitForExit(within timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await process.wait(timeout: timeout).status
    }

    /// Whether a signal ended the worker.
    var wasKilled: Bool {
        if case .signaled? = process.termination { return true }
        return false
    }
}


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

