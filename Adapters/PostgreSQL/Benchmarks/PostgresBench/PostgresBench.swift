import Foundation
import Logging
import MagicMirror
import MagicMirrorPostgreSQL
import PostgresNIO
import Synchronization

/// The workloads of `mirror-bench-postgres`, each on a fresh database of one server.
struct PostgresBench {
    /// The server's URL as given; each workload makes a database of its own there.
    let url: String
    static let logger = Logger(label: "mirror-bench-postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    static let zone = ZoneID.public(BenchRecord.recordType)

    // MARK: - Workloads

    /// One-row INSERT round trips, autocommitted: what a commit cannot beat.
    func rawInsert(count: Int) async throws -> BenchResult {
        try await withDatabase { name in
            try await withClient(database: name) { client in
                try await client.query("CREATE TABLE bench (id text PRIMARY KEY, fields bytea)", logger: Self.logger)
                var latencies: [Double] = []
                for index in 0..<count {
                    let id = "r\(index)"
                    let fields = ByteBuffer(bytes: try Self.fields(index))
                    let start = monotonicSeconds()
                    try await client.query("INSERT INTO bench (id, fields) VALUES (\(id), \(fields))", logger: Self.logger)
                    latencies.append((monotonicSeconds() - start) * 1000)
                }
                return Self.result("raw-insert", latencies, note: "one-row INSERT round trip, autocommit, same server")
            }
        }
    }

    /// `PostgreSQLDatabase.commit` of one new record at a time.
    func commit(count: Int, baseline: BenchResult) async throws -> BenchResult {
        try await withDatabase { name in
            let database = try await PostgreSQLDatabase(url: Self.url(url, database: name))
            var latencies: [Double] = []
            for index in 0..<count {
                let operation = RecordOperation.save(
                    "r\(index)", fields: try Self.fields(index), baseVersion: 0, timestamp: Self.clock(index))
                let start = monotonicSeconds()
                try await database.commit([operation], to: Self.zone)
                latencies.append((monotonicSeconds() - start) * 1000)
            }
            await database.close()
            return Self.result(
                "commit", latencies, baseline: baseline,
                note: "one record per commit: transaction, version check, upsert, NOTIFY")
        }
    }

    /// `NOTIFY` on one connection to its arrival on a `LISTEN` connection of this process.
    func rawNotify(count: Int) async throws -> BenchResult {
        try await withDatabase { name in
            try await withClient(database: name) { client in
                let sent = Mutex<[String: Double]>([:])
                let (arrivals, arrived) = AsyncStream.makeStream(of: Double.self)
                let (listening, ready) = AsyncStream.makeStream(of: Void.self)
                let listener = Task {
                    try await client.withConnection { connection in
                        try await connection.listen(on: "bench") { notifications in
                            ready.yield()
                            for try await notification in notifications {
                                let now = monotonicSeconds()
                                if let start = sent.withLock({ $0[notification.payload] }) {
                                    arrived.yield((now - start) * 1000)
                                }
                            }
                        }
                    }
                }
                defer { listener.cancel() }
                for await _ in listening { break }
                var latencies: [Double] = []
                var iterator = arrivals.makeAsyncIterator()
                for index in 0..<count {
                    let payload = "n\(index)"
                    sent.withLock { $0[payload] = monotonicSeconds() }
                    try await client.query("SELECT pg_notify('bench', \(payload))", logger: Self.logger)
                    guard let latency = await iterator.next() else { throw BenchError("the listener stopped") }
                    latencies.append(latency)
                }
                return Self.result("raw-notify", latencies, note: "NOTIFY to LISTEN arrival, two connections, same server")
            }
        }
    }

    /// A commit's return in this process to the mirror's update in another process, which
    /// hears it through `NOTIFY` and pulls it.
    func propagate(count: Int, baseline: BenchResult) async throws -> BenchResult {
        try await withDatabase { name in
            let databaseURL = Self.url(url, database: name)
            let database = try await PostgreSQLDatabase(url: databaseURL)
            _ = try await database.currentToken(in: Self.zone)
            let child = try ChildProcess.launch(["--child-watch", databaseURL, String(count)])
            defer { child.terminate() }
            guard try child.readLine() == "ready" else { throw BenchError("the watching process did not start") }
            var committed: [String: Double] = [:]
            var latencies: [Double] = []
            for index in 0..<count {
                let record = BenchRecord.make(index)
                let operation = RecordOperation.save(
                    record.recordID, fields: try JSONEncoder().encode(record), baseVersion: 0,
                    timestamp: Self.clock(index))
                try await database.commit([operation], to: Self.zone)
                committed[record.recordID] = monotonicSeconds()
                // One change at a time: wait for it to arrive before the next.
                while let line = try child.readLine() {
                    let parts = line.split(separator: " ")
                    guard parts.count == 2, let seen = Double(parts[1]), let start = committed[String(parts[0])]
                    else { continue }
                    latencies.append((seen - start) * 1000)
                    if parts[0] == record.recordID { break }
                }
            }
            await database.close()
            guard latencies.count == count else {
                throw BenchError("the other process saw \(latencies.count) of \(count) commits")
            }
            return Self.result(
                "propagate", latencies, baseline: baseline,
                note: "commit return in one process to dataModel update in another, through NOTIFY")
        }
    }

    /// The watching process: mirrors the zone and prints `ID TIME` when each record arrives.
    static func watch(url: String, expected: Int) async throws {
        let database = try await PostgreSQLDatabase(url: url)
        let mirror = try await Mirror<BenchRecord>(database: database)
        let (done, finish) = AsyncStream.makeStream(of: Void.self)
        let seen = Mutex(Set<String>())
        let observation = mirror.observe { records in
            let now = monotonicSeconds()
            let fresh = seen.withLock { ids in records.compactMap { ids.insert($0.recordID).inserted ? $0.recordID : nil } }
            let lines = fresh.map { "\($0) \(now)\n" }.joined()
            if !lines.isEmpty { FileHandle.standardOutput.write(Data(lines.utf8)) }
            if records.count >= expected { finish.yield() }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        for await _ in done { break }
        observation.cancel()
        await database.close()
    }

    // MARK: - Assets

    /// Stores a file of `mebibytes` MiB as an asset (streamed to the server in chunks) and
    /// reads it back piece by piece, in this process; the peak resident memory shows that
    /// neither direction holds the asset in memory.
    func asset(mebibytes: Int) async throws -> [BenchResult] {
        try await withDatabase { name in
            let database = try await PostgreSQLDatabase(url: Self.url(url, database: name))
            let zone = ZoneID.public("BenchAsset")
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("bench-asset-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let output = try FileHandle(forWritingTo: file)
            for block in 0..<mebibytes {
                try output.write(contentsOf: Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ block) }))
            }
            try output.close()
            let bytes = Double(mebibytes << 20)
            var start = monotonicSeconds()
            let asset = try await database.storeAsset(contentsOf: file, in: zone)
            let stored = monotonicSeconds() - start
            let afterStore = peakResidentMiB()
            start = monotonicSeconds()
            var read = 0
            for try await piece in database.contents(of: asset, in: zone, chunkSize: 1 << 20) { read += piece.count }
            let readSeconds = monotonicSeconds() - start
            await database.close()
            guard read == mebibytes << 20 else { throw BenchError("read \(read) bytes of \(mebibytes << 20)") }
            return [
                BenchResult(
                    name: "asset-store", n: mebibytes, seconds: stored,
                    peakResidentMiB: afterStore,
                    note: String(format: "%d MiB file to the server in 1 MiB chunks, one transaction: %.0f MiB/s",
                                 mebibytes, bytes / stored / 1_048_576)),
                BenchResult(
                    name: "asset-read", n: mebibytes, seconds: readSeconds,
                    peakResidentMiB: peakResidentMiB(),
                    note: String(format: "%d MiB back in 1 MiB pieces, digest checked: %.0f MiB/s",
                                 mebibytes, bytes / readSeconds / 1_048_576)),
            ]
        }
    }

    // MARK: - Support

    /// The figures of one workload: mean per operation, p50, p99 and max, and the ratio of
    /// its p50 to the baseline's.
    static func result(_ name: String, _ latencies: [Double], baseline: BenchResult? = nil, note: String) -> BenchResult {
        let sorted = latencies.sorted()
        let total = sorted.reduce(0, +)
        var result = BenchResult(
            name: name, n: sorted.count, seconds: total / 1000,
            p50Millis: percentile(sorted, 0.5), p99Millis: percentile(sorted, 0.99), maxMillis: sorted.last, note: note)
        if let baseline, let base = baseline.p50Millis, let p50 = result.p50Millis {
            result.baseline = "\(baseline.name) p50"
            result.baselineFigure = base
            result.baselineUnit = "ms"
            result.ratio = p50 / base
        }
        return result
    }

    /// A clock reading for operation `index`: the wall clock, the index as the counter.
    static func clock(_ index: Int) -> HLCTimestamp {
        HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000), counter: UInt32(index))
    }

    static func fields(_ index: Int) throws -> Data { try JSONEncoder().encode(BenchRecord.make(index)) }

    /// `url` with its database replaced by `name`.
    static func url(_ url: String, database name: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = "/" + name
        return components.string ?? url
    }

    /// Runs `body` with a client of database `name` of the server.
    func withClient<Value: Sendable>(
        database name: String, _ body: (PostgresClient) async throws -> Value
    ) async throws -> Value {
        let configuration = try Self.configuration(Self.url(url, database: name))
        let client = PostgresClient(configuration: configuration)
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await body(client)
    }

    /// Runs `body` with a fresh database (its name is made here of hex digits), dropped after.
    func withDatabase<Value: Sendable>(_ body: (String) async throws -> Value) async throws -> Value {
        let name = "bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = URLComponents(string: url)?.path.dropFirst().description ?? "postgres"
        _ = try await withClient(database: admin.isEmpty ? "postgres" : admin) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: Self.logger)
        }
        do {
            let value = try await body(name)
            try? await drop(name, from: admin)
            return value
        } catch {
            try? await drop(name, from: admin)
            throw error
        }
    }

    private func drop(_ name: String, from admin: String) async throws {
        _ = try await withClient(database: admin.isEmpty ? "postgres" : admin) { client in
            try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: Self.logger)
        }
    }

    /// A postgres-nio configuration for `url` (host, port, role, database; TLS when
    /// `sslmode=require`; the password from PGPASSWORD).
    static func configuration(_ url: String) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), let host = components.host else {
            throw BenchError("not a postgres:// URL with a host: \(url)")
        }
        let database = String(components.path.dropFirst())
        let require = components.queryItems?.contains { $0.name == "sslmode" && $0.value == "require" } ?? false
        return PostgresClient.Configuration(
            host: host, port: components.port ?? 5432,
            username: components.user ?? ProcessInfo.processInfo.environment["PGUSER"] ?? "postgres",
            password: ProcessInfo.processInfo.environment["PGPASSWORD"],
            database: database.isEmpty ? nil : database, tls: require ? .require(.makeClientConfiguration()) : .disable)
    }
}

/// A failure of the benchmark itself.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
