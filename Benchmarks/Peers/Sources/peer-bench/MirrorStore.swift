import Foundation
import MagicMirror

/// MagicMirror as an application uses it: a `Mirror` over a `JSONFileDatabase` with durable
/// commits (the default), each change made to `dataModel` and followed by `flush()`, which
/// returns once the change is on the disk.
/// A class, so that the bookkeeping below is never copied (a struct behind `any PeerStore`
/// would copy it on every change, a cost that grows with the store).
final class MirrorStore: PeerStore {
    static let name = "MagicMirror"
    let database: JSONFileDatabase
    let mirror: Mirror<BenchRecord>
    /// The position of each record in `dataModel`, kept as records are appended.
    var positions: [UUID: Int] = [:]

    static func databaseURL(in directory: URL) -> URL { directory.appendingPathComponent("db") }

    required init(directory: URL) async throws {
        database = try JSONFileDatabase(directory: Self.databaseURL(in: directory))
        mirror = try await Mirror<BenchRecord>(database: database)
    }

    func insert(_ record: BenchRecord) async throws {
        positions[record.id] = mirror.dataModel.count
        mirror.dataModel.append(record)
        try await mirror.flush()
    }

    func insert(batch records: [BenchRecord]) async throws {
        var position = mirror.dataModel.count
        for record in records {
            positions[record.id] = position
            position += 1
        }
        mirror.dataModel.append(contentsOf: records)
        try await mirror.flush()
    }

    func update(_ record: BenchRecord) async throws {
        guard let position = positions[record.id] else { throw PeerError("no record \(record.id)") }
        mirror.dataModel[position] = record
        try await mirror.flush()
    }

    func settle() async throws {
        try await database.compact(.public(BenchRecord.recordType))
    }

    static func openAll(directory: URL) async throws -> [BenchRecord] {
        let database = try JSONFileDatabase(directory: databaseURL(in: directory))
        return try await Mirror<BenchRecord>(database: database).dataModel.array
    }
}
