import Foundation
import Logging
import MagicMirror
import MagicMirrorPostgreSQL
import PostgresNIO

/// `shared-zone`: many writers committing to one zone at once, beside the same number of
/// clients doing the least a commit can do (one `INSERT` and one `NOTIFY` in one
/// transaction) through postgres-nio, in the same run.
extension PostgresBench {
    static let sharedZone = ZoneID.public("BenchShared")

    /// The figures of `writers` concurrent writers: ours and the raw baseline's, each against
    /// a database of its own, `total` commits each in all, split evenly between the writers
    /// and measured in `rounds` that alternate (raw, ours, ours, raw, …), so that a machine
    /// whose load comes and goes weighs on both alike.
    func sharedZone(writers: Int, total: Int, rounds: Int) async throws -> BenchResult {
        let perWriter = max(2, total / writers / rounds)
        let fields = try Self.fields(0)
        return try await withDatabase { rawName in
            try await withDatabase { oursName in
                let raw = try await RawWriters(url: Self.url(url, database: rawName), writers: writers, fields: fields)
                let ours = try await OurWriters(url: Self.url(url, database: oursName), writers: writers, fields: fields)
                var rawRuns: [Concurrent] = [], ourRuns: [Concurrent] = []
                for round in 0..<rounds {
                    let first = round * perWriter
                    if round % 2 == 0 {
                        rawRuns.append(try await raw.run(perWriter: perWriter, from: first))
                        ourRuns.append(try await ours.run(perWriter: perWriter, from: first))
                    } else {
                        ourRuns.append(try await ours.run(perWriter: perWriter, from: first))
                        rawRuns.append(try await raw.run(perWriter: perWriter, from: first))
                    }
                }
                try await ours.finish(expected: writers * perWriter * rounds)
                raw.finish()
                return Self.sharedZoneResult(writers: writers, raw: Concurrent(rawRuns), ours: Concurrent(ourRuns))
            }
        }
    }

    private static func sharedZoneResult(writers: Int, raw: Concurrent, ours: Concurrent) -> BenchResult {
        let sorted = ours.latencies.sorted(), rawSorted = raw.latencies.sorted()
        let rate = Double(sorted.count) / ours.seconds
        let rawRate = Double(rawSorted.count) / raw.seconds
        let p99 = percentile(sorted, 0.99), rawP99 = percentile(rawSorted, 0.99)
        let ratio = rate / rawRate
        let p99Met = writers < 50 || p99 <= 5 * rawP99
        var result = BenchResult(
            name: "shared-zone", variant: "\(writers) writer\(writers == 1 ? "" : "s")", n: sorted.count,
            seconds: ours.seconds, baseline: "raw INSERT+NOTIFY", baselineFigure: rawRate,
            baselineUnit: "commits/s", ratio: ratio,
            target: writers >= 50 ? "ratio ≥ 0.5, p99 ≤ 5× raw p99" : "ratio ≥ 0.5",
            meetsTarget: ratio >= 0.5 && p99Met,
            p50Millis: percentile(sorted, 0.5), p99Millis: p99, maxMillis: sorted.last,
            note: String(
                format: "%d writers at once, each a PostgreSQLDatabase with a pooled connection of its own, one new "
                    + "record per commit to one public zone; raw: one statement (INSERT a row, NOTIFY) per "
                    + "transaction, as many connections; raw p50 %.2f / p99 %.2f ms, our p99 %.1f× raw; this "
                    + "process's CPU per commit: ours %.0f µs, raw %.0f µs",
                writers, percentile(rawSorted, 0.5), rawP99, p99 / rawP99,
                ours.cpuSeconds / Double(sorted.count) * 1e6, raw.cpuSeconds / Double(rawSorted.count) * 1e6))
        result.writers = writers
        result.commitsPerSecond = rate
        result.rawCommitsPerSecond = rawRate
        result.rawP50Millis = percentile(rawSorted, 0.5)
        result.rawP99Millis = rawP99
        return result
    }

    /// What concurrent writers measured: the wall time of the timed part, every call's latency.
    struct Concurrent {
        let seconds: Double
        let latencies: [Double]
        /// This process's CPU time (user and system) meanwhile.
        let cpuSeconds: Double

        init(seconds: Double, latencies: [Double], cpuSeconds: Double) {
            self.seconds = seconds
            self.latencies = latencies
            self.cpuSeconds = cpuSeconds
        }

        /// Runs one after the other, as one.
        init(_ runs: [Concurrent]) {
            seconds = runs.map(\.seconds).reduce(0, +)
            latencies = runs.flatMap(\.latencies)
            cpuSeconds = runs.map(\.cpuSeconds).reduce(0, +)
        }

        /// This process's CPU time so far, in seconds.
        static func processCPU() -> Double {
            var usage = rusage()
            #if os(Linux)
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            #else
            getrusage(RUSAGE_SELF, &usage)
            #endif
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
    }

    /// Runs `operation(writer, index)` once in each of `writers` tasks at once, untimed (the
    /// connections opened, the statements warm).
    static func warmUp(writers: Int, _ operation: @escaping @Sendable (Int, Int) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers { group.addTask { try await operation(writer, -1) } }
            try await group.waitForAll()
        }
    }

    /// Runs `operation(writer, index)` for `perWriter` indexes from `first` in each of
    /// `writers` tasks at once: the wall time and every call's latency.
    static func concurrently(
        writers: Int, perWriter: Int, from first: Int = 0, _ operation: @escaping @Sendable (Int, Int) async throws -> Void
    ) async throws -> Concurrent {
        let start = monotonicSeconds()
        let cpu = Concurrent.processCPU()
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var latencies: [Double] = []
                    latencies.reserveCapacity(perWriter)
                    for index in first..<first + perWriter {
                        let begin = monotonicSeconds()
                        try await operation(writer, index)
                        latencies.append((monotonicSeconds() - begin) * 1000)
                    }
                    return latencies
                }
            }
            var all: [Double] = []
            for try await latencies in group { all += latencies }
            return all
        }
        return Concurrent(
            seconds: monotonicSeconds() - start, latencies: latencies, cpuSeconds: Concurrent.processCPU() - cpu)
    }

}

/// The raw baseline of `shared-zone`: each writer a connection of one postgres-nio pool, each
/// commit one statement that inserts a row and notifies (an implicit transaction, one round
/// trip).
private final class RawWriters: Sendable {
    let client: PostgresClient
    let running: Task<Void, Never>
    let writers: Int
    let fields: ByteBuffer

    init(url: String, writers: Int, fields: Data) async throws {
        var configuration = try PostgresBench.configuration(url)
        configuration.options.maximumConnections = writers
        configuration.options.minimumConnections = 0
        let client = PostgresClient(configuration: configuration)
        self.client = client
        running = Task { await client.run() }
        self.writers = writers
        self.fields = ByteBuffer(bytes: fields)
        try await client.query("CREATE TABLE bench (id text PRIMARY KEY, fields bytea)", logger: PostgresBench.logger)
        try await PostgresBench.warmUp(writers: writers, commit)
    }

    func run(perWriter: Int, from first: Int) async throws -> PostgresBench.Concurrent {
        try await PostgresBench.concurrently(writers: writers, perWriter: perWriter, from: first, commit)
    }

    @Sendable private func commit(writer: Int, index: Int) async throws {
        let id = "w\(writer)-\(index)"
        // A payload of the size of ours: a sequence number and a 32-digit tag.
        let payload = "\(writer * 1_000_000 + index) 0123456789abcdef0123456789abcdef"
        try await client.query(
            """
            WITH inserted AS (INSERT INTO bench (id, fields) VALUES (\(id), \(fields)))
            SELECT pg_notify('bench', \(payload))
            """, logger: PostgresBench.logger)
    }

    func finish() { running.cancel() }
}

/// Ours: each writer a `PostgreSQLDatabase` of its own (its own writer id), sharing the
/// process's link to the server with a pool of one connection per writer.
private final class OurWriters: Sendable {
    let databases: [PostgreSQLDatabase]
    let fields: Data

    init(url: String, writers: Int, fields: Data) async throws {
        var databases: [PostgreSQLDatabase] = []
        for _ in 0..<writers { databases.append(try await PostgreSQLDatabase(url: url, maximumConnections: writers)) }
        self.databases = databases
        self.fields = fields
        try await PostgresBench.warmUp(writers: writers, commit)
    }

    func run(perWriter: Int, from first: Int) async throws -> PostgresBench.Concurrent {
        try await PostgresBench.concurrently(writers: databases.count, perWriter: perWriter, from: first, commit)
    }

    @Sendable private func commit(writer: Int, index: Int) async throws {
        let outcome = try await databases[writer].commit(
            [.save("w\(writer)-\(index)", fields: fields, baseVersion: 0, timestamp: PostgresBench.clock(index + 2))],
            to: PostgresBench.sharedZone)
        guard outcome.isApplied else { throw BenchError("a commit of a new record was not applied") }
    }

    /// Checks that every commit landed once (the warm-up's too), and closes the databases.
    func finish(expected: Int) async throws {
        let count = try await databases[0].fetchAll(in: PostgresBench.sharedZone).records.count
        for database in databases { await database.close() }
        guard count == expected + databases.count else {
            throw BenchError("the zone holds \(count) records, not \(expected + databases.count)")
        }
    }
}
