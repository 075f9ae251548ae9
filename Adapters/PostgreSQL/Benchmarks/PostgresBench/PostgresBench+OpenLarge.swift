import Foundation
import Logging
import MagicMirror
import MagicMirrorPostgreSQL
import PostgresNIO

/// `open-large`: reading a whole zone of many small records (`fetchAll`, what a mirror does
/// when it opens), beside `COPY … TO STDOUT` of the same rows through `psql`, and beside the
/// JSON-file database's `fetchAll` of the same records; each in a process of its own, so
/// that each peak memory is its own.
extension PostgresBench {
    static let largeZone = ZoneID.public(BenchRecord.recordType)

    func openLarge(rows: Int) async throws -> BenchResult {
        let directory = try BenchDirectory("open-large")
        defer { directory.remove() }
        let jsonPath = directory.url.appendingPathComponent("db")
        return try await withDatabase { name in
            let databaseURL = Self.url(url, database: name)
            let zoneID = try await seed(rows: rows, database: name, json: jsonPath)
            // The floor: the same rows, in the server's binary COPY format, to /dev/null.
            let copy = try Self.psqlCopy(
                url: databaseURL,
                """
                COPY (SELECT id, version, fields, modified_millis, modified_counter, writer, created_millis, created_counter
                      FROM magicmirror.records WHERE zone_id = \(zoneID) AND fields IS NOT NULL)
                TO STDOUT (FORMAT binary)
                """)
            let ours = try Self.childFigures(["--child-open-postgres", databaseURL, String(rows)])
            let json = try Self.childFigures(["--child-open-json", jsonPath.path, String(rows)])
            let ratio = ours.seconds / copy
            let memoryRatio = ours.peak / json.peak
            var result = BenchResult(
                name: "open-large", n: rows, seconds: ours.seconds, recordsPerSecond: Double(rows) / ours.seconds,
                baseline: "COPY TO STDOUT", baselineFigure: copy, baselineUnit: "s", ratio: ratio,
                target: "≤ 2× COPY, peak ≤ 1.5× JSON-file",
                meetsTarget: ratio <= 2 && memoryRatio <= 1.5, peakResidentMiB: ours.peak,
                note: String(
                    format: "PostgreSQLDatabase.fetchAll of %d records (about 200 bytes of JSON each) in a fresh "
                        + "process; COPY (binary) of the same rows by psql to /dev/null %.2f s; JSONFileDatabase."
                        + "fetchAll of the same records (compacted) %.2f s, peak %.0f MiB",
                    rows, copy, json.seconds, json.peak))
            result.baselineSeconds = copy
            result.comparedSeconds = json.seconds
            result.comparedPeakResidentMiB = json.peak
            result.memoryRatio = memoryRatio
            return result
        }
    }

    /// Stores `rows` records in database `name` (one zone, commits of 50,000) and the same
    /// records in a JSON-file database at `json` (compacted); the zone's number.
    private func seed(rows: Int, database name: String, json: URL) async throws -> Int {
        let batch = 50_000
        let millis = Int(Date().timeIntervalSince1970 * 1000)
        // The zone, made by a commit of the adapter.
        let database = try await PostgreSQLDatabase(url: Self.url(url, database: name))
        try await database.commit(
            [.save("zone", fields: try Self.fields(0), baseVersion: 0, timestamp: Self.clock(0))], to: Self.largeZone)
        try await database.commit(
            [.delete("zone", baseVersion: 1, timestamp: Self.clock(1))], to: Self.largeZone)
        await database.close()
        var options = JSONFileDatabase.Options()
        options.durability = .relaxed
        options.compactionThreshold = .max
        let jsonDatabase = try JSONFileDatabase(directory: json, options: options)
        let encoder = JSONEncoder()
        let zoneID = try await withClient(database: name) { client in
            try await client.withConnection { connection in
                var zoneID = 0
                for try await found in try await connection.query(
                    "SELECT zone_id FROM magicmirror.zones WHERE record_type = \(BenchRecord.recordType)",
                    logger: Self.logger
                ).decode(Int.self) { zoneID = found }
                // The superuser's rows, without the triggers a role's rows pass (the sharing
                // trigger alone would cost a query per row).
                try await connection.query("SET session_replication_role = replica", logger: Self.logger)
                var start = 0
                while start < rows {
                    let end = min(rows, start + batch)
                    var ids: [String] = [], fields: [ByteBuffer] = [], counters: [Int] = []
                    var operations: [RecordOperation] = []
                    for index in start..<end {
                        let record = BenchRecord.make(index)
                        let data = try encoder.encode(record)
                        ids.append(record.recordID)
                        fields.append(ByteBuffer(bytes: data))
                        counters.append(index)
                        operations.append(.save(
                            record.recordID, fields: data, baseVersion: 0,
                            timestamp: HLCTimestamp(millis: Int64(millis), counter: UInt32(index))))
                    }
                    try await connection.query(
                        """
                        WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                             moved AS (UPDATE magicmirror.zones SET last_seq = drawn.seq FROM drawn
                                       WHERE zone_id = \(zoneID))
                        INSERT INTO magicmirror.records
                            (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq,
                             created_millis, created_counter)
                        SELECT \(zoneID), 'public', '', r.id, 1, r.fields, \(millis), r.n, 'bench-seed', drawn.seq,
                               \(millis), r.n
                        FROM drawn, unnest(\(ids)::text[], \(fields)::bytea[], \(counters)::int8[]) AS r(id, fields, n)
                        """, logger: Self.logger)
                    try await jsonDatabase.commit(operations, to: Self.largeZone)
                    start = end
                }
                try await connection.query("SET session_replication_role = origin", logger: Self.logger)
                try await connection.query("ANALYZE magicmirror.records", logger: Self.logger)
                return zoneID
            }
        }
        try await jsonDatabase.compact(Self.largeZone)
        return zoneID
    }

    /// Runs `sql` (a `COPY … TO STDOUT`) with `psql`, its output to /dev/null; the seconds it
    /// took, the start of psql and its connection included.
    static func psqlCopy(url: String, _ sql: String) throws -> Double {
        let process = Process()
        process.executableURL = try psql()
        process.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql]
        process.standardOutput = FileHandle.nullDevice
        let start = monotonicSeconds()
        try process.run()
        process.waitUntilExit()
        let seconds = monotonicSeconds() - start
        guard process.terminationStatus == 0 else { throw BenchError("psql exited with \(process.terminationStatus)") }
        return seconds
    }

    /// `psql`: `$PSQL`, else in `PATH`, else beside the server's programs.
    static func psql() throws -> URL {
        let environment = ProcessInfo.processInfo.environment
        var candidates = environment["PSQL"].map { [$0] } ?? []
        candidates += (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/psql" }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.sorted { $0.compare($1, options: .numeric) == .orderedDescending }
            .map { "/usr/lib/postgresql/\($0)/bin/psql" }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BenchError("open-large needs psql for its COPY baseline: install it or set PSQL")
        }
        return URL(fileURLWithPath: found)
    }

    /// The `SECONDS PEAK_MIB` a child process prints.
    static func childFigures(_ arguments: [String]) throws -> (seconds: Double, peak: Double) {
        let report = try ChildProcess.launch(arguments).readAll()
        let figures = report.split(separator: " ").compactMap { Double($0) }
        guard figures.count == 2 else { throw BenchError("child \(arguments[0]) printed \(report)") }
        return (figures[0], figures[1])
    }

    /// The child process that opens: `fetchAll` of the zone, timed, then `SECONDS PEAK_MIB`.
    static func openChild(_ mode: String, _ arguments: [String]) async throws {
        guard arguments.count == 2, let expected = Int(arguments[1]) else { throw BenchError("\(mode) \(arguments)") }
        let count: Int
        let seconds: Double
        if mode == "--child-open-postgres" {
            let database = try await PostgreSQLDatabase(url: arguments[0])
            let start = monotonicSeconds()
            count = try await database.fetchAll(in: largeZone).records.count
            seconds = monotonicSeconds() - start
            await database.close()
        } else {
            let database = try JSONFileDatabase(directory: URL(fileURLWithPath: arguments[0]))
            let start = monotonicSeconds()
            count = try await database.fetchAll(in: largeZone).records.count
            seconds = monotonicSeconds() - start
        }
        guard count == expected else { throw BenchError("\(mode) read \(count) of \(expected) records") }
        print("\(seconds) \(peakResidentMiB() ?? .nan)")
    }
}
