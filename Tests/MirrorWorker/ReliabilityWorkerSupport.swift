import Dispatch
import Foundation
import MirrorTestSupport
import MagicMirror

// What the reliability subcommands (`mirror-writer`, `mirror-editor`, `mirror-retry`) share:
// option parsing, output and standard input. Their record types are in MirrorTestSupport
// (Tests/Support/ReliabilityRecords.swift), shared with the tests that read them back.

/// `--name value` options and `--flag` switches.
struct WorkerOptions {
    private var values: [String: String] = [:]
    private var switches: Set<String> = []
    let usage: String

    /// Parses `arguments`; `flags` are the switches that take no value.
    init(_ arguments: [String], flags: Set<String> = [], usage: String) throws {
        self.usage = usage
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw WorkerUsageError("unexpected \(argument); \(usage)") }
            let name = String(argument.dropFirst(2))
            if flags.contains(name) {
                switches.insert(name)
                index += 1
            } else {
                guard index + 1 < arguments.count else { throw WorkerUsageError("\(argument) needs a value; \(usage)") }
                values[name] = arguments[index + 1]
                index += 2
            }
        }
    }

    func string(_ name: String) -> String? { values[name] }

    func required(_ name: String) throws -> String {
        guard let value = values[name] else { throw WorkerUsageError("--\(name) is required; \(usage)") }
        return value
    }

    func int(_ name: String, default value: Int) throws -> Int {
        guard let text = values[name] else { return value }
        guard let number = Int(text) else { throw WorkerUsageError("--\(name) needs a number; \(usage)") }
        return number
    }

    func flag(_ name: String) -> Bool { switches.contains(name) }

    /// Arms `--crash-at OPERATION:CALL[:BYTES]` on a database's file-system seam.
    func armCrash(on database: JSONFileDatabase) throws {
        guard let crash = values["crash-at"] else { return }
        let parts = crash.split(separator: ":").map(String.init)
        guard let operation = parts.first.flatMap(FileSystem.Operation.init(rawValue:)),
              let call = parts.dropFirst().first.flatMap(Int.init)
        else { throw WorkerUsageError("bad --crash-at \(crash); \(usage)") }
        database.fileSystem.crash(at: operation, call: call, afterBytes: parts.count > 2 ? Int(parts[2]) ?? 0 : 0)
    }
}

/// Writes one line to standard output at once (unbuffered), so that a line printed before
/// a SIGKILL is never lost.
func emitLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Reads the next line of standard input without blocking the cooperative thread pool;
/// `nil` at the end of input.
func readInputLine() async -> String? {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: readLine()) }
    }
}

/// Waits for the line `expected` on standard input.
func waitForInput(_ expected: String) async throws {
    while let line = await readInputLine() {
        if line == expected { return }
    }
    throw WorkerUsageError("standard input ended before \"\(expected)\"")
}

/// Waits until `mirror`'s records satisfy `condition`, without polling: the mirror's
/// observer calls back with the current records first, then after every change.
func waitForRecords<Record: Recordable>(
    _ mirror: Mirror<Record>, timeout: Duration, _ what: String,
    until condition: @escaping @Sendable ([Record]) -> Bool
) async throws {
    let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
    let observation = mirror.observe { records in
        if condition(records) { continuation.yield(true) }
    }
    defer { observation.cancel() }
    let met = await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await _ in stream { return true }
            return false
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return false
        }
        defer { group.cancelAll() }
        return await group.next() ?? false
    }
    continuation.finish()
    guard met else { throw MirrorError(.timedOut, "timed out after \(timeout) waiting for \(what)") }
}
