import Foundation
import MagicMirror
import Synchronization

/// The benchmark's second processes: `--child-open` opens a mirror and reports time and peak
/// memory; `--child-watch` mirrors a zone and prints when each record arrives.
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
    func readAll() throws -> String {
        var lines: [String] = []
        while let line = try readLine() { lines.append(line) }
        process.waitUntilExit()
        return lines.joined(separator: "\n")
    }

    func terminate() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    static func run(_ mode: String, _ arguments: [String]) async throws {
        switch mode {
        case "--child-open":
            let path = URL(fileURLWithPath: arguments[0])
            let expected = Int(arguments[1]) ?? 0
            var count = 0
            let seconds = try await time {
                let database = try JSONFileDatabase(directory: path)
                let mirror = try await Mirror<BenchRecord>(database: database)
                count = mirror.dataModel.count
            }
            guard count == expected else { throw BenchError("opened \(count) of \(expected) records") }
            if ProcessInfo.processInfo.environment["MIRROR_BENCH_PHASES"] != nil {
                // Where the time goes, for whoever tunes opening: a fresh engine is not
                // possible in this process, so the phases are timed on the warm one.
                let database = try JSONFileDatabase(directory: path)
                let fetch = try await time { _ = try await database.fetchAll(in: Workloads.zone) }
                let set = try await database.fetchAll(in: Workloads.zone)
                let decode = time { _ = RecordBatchCoding.decode(set.records, as: BenchRecord.self, with: JSONDecoder()) }
                let mirror = try await time { _ = try await Mirror<BenchRecord>(database: database) }
                FileHandle.standardError.write(Data("phases: fetchAll(warm) \(fetch) s, decode \(decode) s, mirror(warm) \(mirror) s\n".utf8))
            }
            print("\(seconds) \(peakResidentMiB() ?? .nan)")
        case "--child-watch":
            let path = URL(fileURLWithPath: arguments[0])
            let expected = Int(arguments[1]) ?? 0
            let database = try JSONFileDatabase(directory: path)
            let mirror = try await Mirror<BenchRecord>(database: database)
            let (done, finish) = AsyncStream.makeStream(of: Void.self)
            let seen = SeenSet()
            let observation = mirror.observe { records in
                let now = monotonicSeconds()
                let lines = seen.newIDs(in: records).map { "\($0) \(now)\n" }.joined()
                if !lines.isEmpty { FileHandle.standardOutput.write(Data(lines.utf8)) }
                if records.count >= expected { finish.yield() }
            }
            FileHandle.standardOutput.write(Data("ready\n".utf8))
            for await _ in done { break }
            _ = observation
        default:
            throw BenchError("unknown mode \(mode)")
        }
    }
}

/// The record ids a watcher has already reported.
final class SeenSet: Sendable {
    private let ids = Mutex(Set<String>())
    func newIDs(in records: [BenchRecord]) -> [String] {
        ids.withLock { ids in
            records.compactMap { ids.insert($0.recordID).inserted ? $0.recordID : nil }
        }
    }
}
