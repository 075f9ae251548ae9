import Foundation
import MagicMirror

/// The benchmark record's next version: one more field, added by a migration.
struct BenchRecordV2: Recordable {
    static var recordType: String { BenchRecord.recordType }
    static let migrations: [RecordMigration] = [.add("priority", default: 0)]
    var id: UUID
    var title: String
    var done: Bool
    var created: Date
    var number: Int
    var priority = 0
}

extension Workloads {
    /// `migrate`: the cost of a schema migration over `open` records (100,000) of version 1,
    /// on a durable JSON-file database, with the migration `.add("priority", default: 0)`.
    ///
    /// - `open, migrating in memory`: opening a `Mirror<BenchRecordV2>` over the version 1
    ///   records, each migrated as it loads; against opening a `Mirror<BenchRecord>` over
    ///   the same records (no migration). Target: at most 2× the plain open.
    /// - `write back`: `migrateStoredRecords()` rewriting every record (fsynced batches of
    ///   500); against committing the same number of saves in batches of 500 directly.
    ///   Target: at most 2× the plain commits.
    /// - `open after write-back`: opening a `Mirror<BenchRecordV2>` once every record is
    ///   stored in version 2; against the plain open. Target: at most 1.5×.
    static func migrate(count: Int) async throws -> [BenchResult] {
        let directory = try BenchDirectory("migrate")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("db")
        let records = BenchRecord.makeMany(count)
        do {
            let seeding = try JSONFileDatabase(directory: path, options: options(durable: false, compaction: false))
            try await seed(seeding, with: records)
            try await seeding.compact(zone)
        }

        let plainOpen = try await time {
            let mirror = try await Mirror<BenchRecord>(database: try JSONFileDatabase(directory: path))
            guard mirror.dataModel.count == count else { throw BenchError("plain open loaded \(mirror.dataModel.count)") }
        }
        let database = try JSONFileDatabase(directory: path)
        var mirror: Mirror<BenchRecordV2>?
        let migratingOpen = try await time {
            mirror = try await Mirror<BenchRecordV2>(database: database)
        }
        guard let mirror, mirror.dataModel.count == count else {
            throw BenchError("migrating open loaded \(mirror?.dataModel.count ?? 0) of \(count)")
        }

        var rewritten = 0
        let writeBack = try await time { rewritten = try await mirror.migrateStoredRecords() }
        guard rewritten == count else { throw BenchError("write-back rewrote \(rewritten) of \(count)") }
        let commitBaseline = try await plainCommits(count: count, batch: 500)

        let migratedOpen = try await time {
            let reopened = try await Mirror<BenchRecordV2>(database: try JSONFileDatabase(directory: path))
            guard reopened.dataModel.count == count, reopened.dataModel.allSatisfy({ $0.priority == 0 }) else {
                throw BenchError("reopen after write-back loaded \(reopened.dataModel.count)")
            }
        }

        func result(_ variant: String, _ seconds: Double, _ baseline: String, _ figure: Double, limit: Double) -> BenchResult {
            let ratio = seconds / figure
            return BenchResult(
                name: "migrate", variant: variant, n: count, seconds: seconds,
                recordsPerSecond: Double(count) / seconds, baseline: baseline, baselineFigure: figure,
                baselineUnit: "s", ratio: ratio, target: "≤ \(limit)× baseline", meetsTarget: ratio <= limit)
        }
        return [
            result("open, migrating in memory", migratingOpen, "open, no migration", plainOpen, limit: 2),
            result("write back", writeBack, "commits of 500 saves", commitBaseline, limit: 2),
            result("open after write-back", migratedOpen, "open, no migration", plainOpen, limit: 1.5),
        ]
    }

    /// Seconds to commit `count` new records in durable batches of `batch` to a fresh
    /// database.
    private static func plainCommits(count: Int, batch: Int) async throws -> Double {
        let directory = try BenchDirectory("migrate-baseline")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url.appendingPathComponent("db"))
        let operations = try BenchRecord.makeMany(count).map { try save($0) }
        return try await time {
            var start = 0
            while start < operations.count {
                let end = min(start + batch, operations.count)
                _ = try await database.commit(Array(operations[start..<end]), to: zone)
                start = end
            }
        }
    }
}
