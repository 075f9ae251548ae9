import Foundation

/// A second process of a benchmark: this executable started again with arguments of its
/// own, read line by line. (Linked into peer-bench and mirror-bench-postgres too; the modes
/// of mirror-bench are in ChildProcess+Modes.swift.)
final class ChildProcess {
    let process: Process
    private let output: FileHandle
    private var buffer = Data()

    private init(process: Process, output: FileHandle) {
        self.process = process
        self.output = output
    }

    static func launch(_ arguments: [String]) throws -> ChildProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #if !os(Linux)
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return ChildProcess(process: process, output: pipe.fileHandleForReading)
    }

    /// The next line of the child's output, or nil at its end.
    func readLine() throws -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = output.availableData
            if chunk.isEmpty { return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self) }
            buffer.append(chunk)
        }
    }

    /// Everything the child prints, after it exits.
    ///
    /// - Throws: ``Failure`` when the child exits with a status other than 0.
    func readAll() throws -> String {
        var lines: [String] = []
        while let line = try readLine() { lines.append(line) }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "child \(process.arguments ?? []) exited with status \(process.terminationStatus)")
        }
        return lines.joined(separator: "\n")
    }

    /// A child process that failed.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func terminate() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
