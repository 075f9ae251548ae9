import Foundation
import MagicMirror

/// `mirror-worker read --db DIR [--zone T]`: opens a JSON-file database as a reader in a
/// process of its own and prints each stored record of the zone (`--zone`, default `Todo`),
/// sorted by id, as `<id> <version> <modified> <created> <field bytes>`, then
/// `problems <count>` for what the database reported while reading.
enum ReadCommand {
    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, flags: [], usage: "mirror-worker read --db DIR [--zone T]")
        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: try options.required("db")))
        let zone = ZoneID.public(options.string("zone") ?? "Todo")
        for record in try await database.fetchAll(in: zone).records.sorted(by: { $0.id < $1.id }) {
            print("\(record.id) \(record.version) \(record.modified) \(record.created) \(record.fields?.count ?? 0)")
        }
        print("problems \(database.problems.count)")
    }
}
