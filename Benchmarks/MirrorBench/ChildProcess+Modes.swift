import Foundation
import MagicMirror
import Synchronization

/// mirror-bench's second processes: `--child-open` opens a mirror and reports time and peak
/// memory; `--child-watch` mirrors a zone and prints when each record arrives;
/// `--child-batch-insert COUNT ROUNDS` repeats batch-insert's measured work alone, for a
/// profiler (`perf record mirror-bench --child-batch-insert 100000 20`), printing each round.
extension ChildProcess {
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
                let decode = time { _ = BatchJSONCoding.decode(set.records, as: BenchRecord.self, with: JSONDecoder()) }
                let mirror = try await time { _ = try await Mirror<BenchRecord>(database: database) }
                FileHandle.standardError.write(Data("phases: fetchAll(warm) \(fetch) s, decode \(decode) s, mirror(warm) \(mirror) s\n".utf8))
            }
            print("\(seconds) \(peakResidentMiB() ?? .nan)")
        case "--child-batch-insert":
            let count = Int(arguments[0]) ?? 100_000
            let records = BenchRecord.makeMany(count)
            for _ in 0..<(Int(arguments[1]) ?? 1) {
                let directory = try BenchDirectory("batch")
                defer { directory.remove() }
                let database = try JSONFileDatabase(
                    directory: directory.url.appendingPathComponent("db"), options: Workloads.options(durable: true))
                let faults = minorFaults()
                let seconds = try await time { try await Workloads.insertBatch(records, into: database) }
                print("\(seconds) s, \(Int(Double(count) / seconds)) rec/s, \(minorFaults() - faults) page faults")
                if ProcessInfo.processInfo.environment["MIRROR_BENCH_PHASES"] != nil {
                    let directory = try BenchDirectory("batch")
                    defer { directory.remove() }
                    let database = try JSONFileDatabase(
                        directory: directory.url.appendingPathComponent("db"), options: Workloads.options(durable: true))
                    var encoded: [Result<Data, any Error>] = []
                    let encode = time { encoded = BatchJSONCoding.encode(records, with: Workloads.encoder) }
                    var operations: [RecordOperation] = []
                    let operate = try time { operations = try Workloads.saves(of: records, encoded: encoded) }
                    let commit = try await time { try await database.commit(operations, to: Workloads.zone) }
                    print("phases (again, warm): encode \(encode) s, operations \(operate) s, commit \(commit) s")
                    try await database.waitForBackgroundWork(in: Workloads.zone)
                }
                // The commit's compaction, in the background, is not measured: it would fall
                // on the next round.
                try await database.waitForBackgroundWork(in: Workloads.zone)
            }
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

/// The minor page faults of this process so far.
func minorFaults() -> Int {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return usage.ru_minflt
}

/// The record ids a watcher has already reported. The workload only adds records, and a
/// mirror shows them in creation order, so only the records past the last count are looked
/// at: the observer's cost does not grow with the records seen, which would add to the
/// latencies it reports.
final class SeenSet: Sendable {
    private let state = Mutex((ids: Set<String>(), count: 0))
    func newIDs(in records: [BenchRecord]) -> [String] {
        state.withLock { state in
            let start = records.count >= state.count ? state.count : 0
            state.count = records.count
            return records[start...].compactMap { state.ids.insert($0.recordID).inserted ? $0.recordID : nil }
        }
    }
}
