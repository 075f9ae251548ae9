import Foundation
import GRDB

extension BenchRecord: FetchableRecord, PersistableRecord {}

/// GRDB as an application uses it for durability: a `DatabasePool` (WAL), with
/// `synchronous = FULL` so that a commit's return means it is on the disk, and records
/// stored and fetched through `Codable` (`PersistableRecord`, `FetchableRecord`).
struct GRDBStore: PeerStore {
    static let name = "GRDB"
    let pool: DatabasePool

    static func configuration() -> Configuration { Configuration() }

    static func path(in directory: URL) -> String { directory.appendingPathComponent("db.sqlite").path }

    init(directory: URL) async throws {
        pool = try DatabasePool(path: Self.path(in: directory), configuration: Self.configuration())
        // Not in `prepareDatabase`: a pool sets `synchronous = NORMAL` after it (WAL mode),
        // and with NORMAL a WAL commit is not flushed at all (until 2026-11-23 this
        // benchmark compared MagicMirror's flushed commits with GRDB's unflushed ones). Set
        // on the writer, and checked.
        try Self.requireFullSynchronous(pool)
        try Self.write(pool) { db in
            try db.create(table: BenchRecord.databaseTableName, options: .ifNotExists) { table in
                table.primaryKey("id", .blob)
                table.column("title", .text).notNull()
                table.column("done", .boolean).notNull()
                table.column("created", .datetime).notNull()
                table.column("number", .integer).notNull()
            }
        }
    }

    mutating func insert(_ record: BenchRecord) async throws {
        try Self.write(pool) { db in try record.insert(db) }
    }

    mutating func insert(batch records: [BenchRecord]) async throws {
        try Self.write(pool) { db in
            for record in records { try record.insert(db) }
        }
    }

    mutating func update(_ record: BenchRecord) async throws {
        try Self.write(pool) { db in try record.update(db) }
    }

    mutating func settle() async throws {
        try Self.checkpoint(pool)
    }

    static func openAll(directory: URL) async throws -> [BenchRecord] {
        try fetchAll(path: path(in: directory))
    }

    // GRDB's synchronous calls, its fastest path (in an async function, Swift would pick
    // the async overloads, which add a hop to GRDB's queue).
    private static func write(_ pool: DatabasePool, _ updates: (Database) throws -> Void) throws {
        try pool.write(updates)
    }

    private static func requireFullSynchronous(_ pool: DatabasePool) throws {
        let level = try pool.writeWithoutTransaction { db -> Int? in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        guard level == 2 else { throw PeerError("GRDB's writer is at synchronous = \(level ?? -1), not FULL (2)") }
    }

    private static func checkpoint(_ pool: DatabasePool) throws {
        _ = try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    private static func fetchAll(path: String) throws -> [BenchRecord] {
        let pool = try DatabasePool(path: path, configuration: configuration())
        return try pool.read { db in try BenchRecord.fetchAll(db) }
    }
}
