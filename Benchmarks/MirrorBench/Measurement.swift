import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of the benchmark's output.
struct BenchResult: Encodable {
    var name: String
    var variant: String?
    var n: Int
    var seconds: Double
    var perOpMicros: Double?
    var recordsPerSecond: Double?
    var baseline: String?
    var baselineFigure: Double?
    var baselineUnit: String?
    var ratio: Double?
    var target: String?
    var meetsTarget: Bool?
    var p50Millis: Double?
    var p99Millis: Double?
    var maxMillis: Double?
    var peakResidentMiB: Double?
    var note: String?
    // Workloads with concurrent writers (mirror-bench-postgres shared-zone): how many, the
    // rate, and the raw baseline's figures of the same run.
    var writers: Int?
    var commitsPerSecond: Double?
    var rawCommitsPerSecond: Double?
    var rawP50Millis: Double?
    var rawP99Millis: Double?
    // Workloads measured beside another database's memory (mirror-bench-postgres open-large).
    var baselineSeconds: Double?
    var comparedPeakResidentMiB: Double?
    var comparedSeconds: Double?
    var memoryRatio: Double?
    // Connections one server holds (relay-bench idle-clients): how many, the server's memory
    // per client above its memory with none, its resident memory and open descriptors, and
    // whether every client was answered within the protocol's dead-link window.
    var clients: Int?
    var kibPerClient: Double?
    var relayRSSMiB: Double?
    var descriptors: Int?
    var allAnswered: Bool?
}

/// Monotonic time in seconds.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Runs `body` and returns how long it took, in seconds.
@discardableResult
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = monotonicSeconds()
    try body()
    return monotonicSeconds() - start
}

/// Runs `body` and returns how long it took, in seconds.
func time(_ body: () async throws -> Void) async rethrows -> Double {
    let start = monotonicSeconds()
    try await body()
    return monotonicSeconds() - start
}

/// The process's peak resident set size in MiB (VmHWM on Linux, ru_maxrss on macOS).
func peakResidentMiB() -> Double? {
    #if canImport(Glibc)
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let digits = line.split(separator: " ").compactMap { Double($0) }
        if let kib = digits.first { return kib / 1024 }
    }
    return nil
    #else
    var usage = rusage()
    getrusage(RUSAGE_SELF, &usage)
    return Double(usage.ru_maxrss) / 1024 / 1024
    #endif
}

/// The `p`-th percentile (0...1) of sorted values.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))
    return sorted[index]
}

/// A fresh temporary directory for one workload, removed by `remove()`.
struct BenchDirectory {
    let url: URL
    init(_ label: String) throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("mirror-bench-\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    /// Removes the directory, unless `MIRROR_BENCH_KEEP` is set (to profile a workload's
    /// data afterwards).
    func remove() {
        if ProcessInfo.processInfo.environment["MIRROR_BENCH_KEEP"] != nil {
            FileHandle.standardError.write(Data("kept \(url.path)\n".utf8))
            return
        }
        try? FileManager.default.removeItem(at: url)
    }
}

enum Output {
    static func table(_ results: [BenchResult]) -> String {
        var lines: [String] = []
        let header = ["workload", "n", "result", "baseline", "ratio", "target"]
        var rows: [[String]] = [header]
        for r in results {
            let name = r.variant.map { "\(r.name) (\($0))" } ?? r.name
            var figure: String
            if let clients = r.clients, let perClient = r.kibPerClient, let rss = r.relayRSSMiB {
                figure = String(format: "%ld clients: %.1f KiB/client, RSS %.0f MiB, %ld fds, ", clients, perClient, rss, r.descriptors ?? -1)
                    + ((r.allAnswered ?? false) ? "all answered" : "NOT all answered")
                    + (r.maxMillis.map { String(format: ", longest poll %.2f s", $0 / 1000) } ?? "")
            } else if let rate = r.commitsPerSecond, let p99 = r.p99Millis {
                figure = String(format: "%.0f commits/s, p99 %.2f ms", rate, p99)
            } else if let perOp = r.perOpMicros {
                figure = String(format: "%.1f µs/op", perOp)
            } else if let rate = r.recordsPerSecond {
                figure = String(format: "%.0f rec/s", rate)
            } else if let p50 = r.p50Millis, let p99 = r.p99Millis, let max = r.maxMillis {
                figure = String(format: "p50 %.2f / p99 %.2f / max %.2f ms", p50, p99, max)
            } else {
                figure = String(format: "%.3f s", r.seconds)
            }
            if let rss = r.peakResidentMiB { figure += String(format: ", peak %.0f MiB", rss) }
            if let rss = r.comparedPeakResidentMiB, let ratio = r.memoryRatio {
                figure += String(format: " (%.2f× the other's %.0f MiB)", ratio, rss)
            }
            let baseline: String
            if let b = r.baseline, let f = r.baselineFigure {
                baseline = "\(b): " + String(format: "%.2f", f) + " \(r.baselineUnit ?? "")"
            } else {
                baseline = r.baseline ?? ""
            }
            let ratio = r.ratio.map { String(format: "%.2f×", $0) } ?? ""
            var target = r.target ?? ""
            if let met = r.meetsTarget { target += met ? " ✓" : " ✗" }
            rows.append([name, "\(r.n)", figure, baseline, ratio, target])
        }
        let widths = (0..<header.count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for (index, row) in rows.enumerated() {
            lines.append(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                .joined(separator: "  "))
            if index == 0 { lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
        }
        let notes = results.compactMap { r in r.note.map { "- \(r.variant.map { "\(r.name) (\($0))" } ?? r.name): \($0)" } }
        if !notes.isEmpty { lines += ["", "Notes:"] + notes }
        return lines.joined(separator: "\n")
    }

    static func json(_ result: BenchResult) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try! encoder.encode(result), as: UTF8.self)
    }
}

/// The command line every benchmark of the project takes (`mirror-bench`, `peer-bench`,
/// `mirror-bench-postgres`): `--quick`, `--json`, `--only name,name`, `--help`, and options
/// of its own that take a value (`--url URL`).
struct BenchCommand {
    let program: String
    let workloads: [String]
    private(set) var quick = false
    private(set) var json = false
    private(set) var only: Set<String>?
    private(set) var values: [String: String] = [:]

    /// Parses `arguments`. A mistake prints a message and exits with status 2; `--help`
    /// prints the usage and exits with 0.
    ///
    /// - Parameter options: The names (without `--`) of the program's own options, each
    ///   followed by a value.
    init(program: String, workloads: [String], options: [String: String] = [:], arguments: [String]) {
        self.program = program
        self.workloads = workloads
        let usage = "usage: \(program) [--quick] [--json] [--only name,name]"
            + options.keys.sorted().map { " [--\($0) \(options[$0]!)]" }.joined()
            + "\nworkloads: \(workloads.joined(separator: ", "))"
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.hasPrefix("--") ? String(argument.dropFirst(2)) : argument
            switch argument {
            case "--quick": quick = true
            case "--json": json = true
            case "--help", "-h":
                print(usage)
                exit(0)
            case "--only" where index + 1 < arguments.count:
                index += 1
                only = Set(arguments[index].split(separator: ",").map(String.init))
            case _ where options[name] != nil && index + 1 < arguments.count:
                index += 1
                values[name] = arguments[index]
            default:
                Self.fail(program, "unknown or incomplete argument \(argument)\n\(usage)")
            }
            index += 1
        }
        if let only, let unknown = only.subtracting(workloads).first {
            Self.fail(program, "unknown workload \(unknown)\n\(usage)")
        }
    }

    /// Runs each chosen workload in order and prints its results as a table, or as one JSON
    /// object per line with `--json`; a workload that throws ends the program with status 1.
    func run(_ workload: (String) async throws -> [BenchResult]) async -> Never {
        if !json {
            print("\(program) \(quick ? "(quick) " : "")on \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Date())")
        }
        var results: [BenchResult] = []
        for name in workloads where only?.contains(name) ?? true {
            if !json { FileHandle.standardError.write(Data("running \(name)…\n".utf8)) }
            do {
                for result in try await workload(name) {
                    if json { print(Output.json(result)) }
                    results.append(result)
                }
            } catch {
                Self.fail(program, "\(name) failed: \(error)", status: 1)
            }
        }
        if !json { print(Output.table(results)) }
        exit(0)
    }

    /// Runs the child-process mode `arguments` names (`--child-…`), if any: the benchmark
    /// starts itself again for workloads measured in another process.
    static func runChild(program: String, _ arguments: [String], _ body: (String, [String]) async throws -> Void) async {
        guard let mode = arguments.first, mode.hasPrefix("--child-") else { return }
        do {
            try await body(mode, Array(arguments.dropFirst()))
            exit(0)
        } catch {
            fail(program, "\(mode): \(error)", status: 1)
        }
    }

    static func fail(_ program: String, _ message: String, status: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
        exit(status)
    }
}
