import Foundation
import MagicMirror

/// MagicMirror's database without a mirror: each record encoded with `JSONEncoder` and
/// committed to a `JSONFileDatabase` (durable, the default) with `commit(_:to:)`, the level
/// GRDB's record API works at. Beside ``MirrorStore`` it shows what the mirror adds.
/// A class, so that the bookkeeping below is never copied (a struct behind `any PeerStore`
/// would copy it on every change, a cost that grows with the store).
final class JSONFileStore: PeerStore {
    static let name = "MagicMirror database"
    static let zone = ZoneID.public(BenchRecord.recordType)
    let database: JSONFileDatabase
    let encoder = JSONEncoder()
    /// The stored version of each record, the base of its next change.
    var versions: [String: Int] = [:]
    var clock = 0

    required init(directory: URL) async throws {
        database = try JSONFileDatabase(directory: MirrorStore.databaseURL(in: directory))
    }

    func operation(_ record: BenchRecord) throws -> RecordOperation {
        clock += 1
        let base = versions[record.recordID] ?? 0
        versions[record.recordID] = base + 1
        return .save(
            record.recordID, fields: try encoder.encode(record), baseVersion: base,
            timestamp: HLCTimestamp(millis: 1_763_700_000_000 + Int64(clock)))
    }

    func insert(_ record: BenchRecord) async throws {
        try await commit([operation(record)])
    }

    func insert(batch records: [BenchRecord]) async throws {
        var operations: [RecordOperation] = []
        operations.reserveCapacity(records.count)
        for record in records { operations.append(try operation(record)) }
        try await commit(operations)
    }

    func update(_ record: BenchRecord) async throws {
        try await commit([operation(record)])
    }

    func commit(_ operations: [RecordOperation]) async throws {
        let outcome = try await database.commit(operations, to: Self.zone)
        guard outcome.isApplied else { throw PeerError("a commit conflicted") }
    }

    func settle() async throws {
        try await database.compact(Self.zone)
    }

    static func openAll(directory: URL) async throws -> [BenchRecord] {
        try await MirrorStore.openAll(directory: directory)
    }
}
