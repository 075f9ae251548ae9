import Foundation
import MagicMirror
import MirrorTestSupport

/// `mirror-worker asset`: a `Mirror` of records that carry assets, driven by commands on
/// standard input, for the multi-process and crash tests of assets.
///
/// ```
/// mirror-worker asset --db DIR [--crash-at OPERATION:CALL[:BYTES]]
/// ```
///
/// - `--crash-at`: the process kills itself with SIGKILL at that call of the file-system
///   seam, counted from the moment the mirror is loaded (see `WriteCommand`).
///
/// Output, one line each, written whole: `ready <writerID>` once the mirror is loaded;
/// `stored <name> <digest>`, `committed <name>`, `deleted <name>` after each command;
/// `error <message>` for a command that failed.
///
/// Commands:
/// - `store <name> <size>`: stores `AssetPayload.bytes(name:size:)` (from a file, streamed)
///   and keeps the asset under `name`, without committing anything;
/// - `commit <name>`: appends an `AssetRecord` with id `name` carrying the asset stored
///   under `name`, and flushes;
/// - `delete <name>`: removes the record `name` and flushes;
/// - `loop <count> <size>`: `store` and `commit` `count` records `l<n>` of up to `size`
///   bytes each (sizes vary), printing `committed l<n>` after each flush;
/// - `quit`.
enum AssetCommand {
    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, usage: "mirror-worker asset --db DIR [--crash-at OP:CALL[:BYTES]]")
        let directory = try options.required("db")
        let database = try options.openDatabase(directory)
        let mirror = try await Mirror<AssetRecord>(database: database)
        try options.armCrash()
        emitLine("ready \(database.writerID)")
        var stored: [String: Asset] = [:]
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("mirror-worker-asset-\(getpid())", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        func store(_ name: String, size: Int) async throws -> Asset {
            let file = scratch.appendingPathComponent(name)
            try AssetPayload.bytes(name: name, size: size).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            return try await mirror.storeAsset(contentsOf: file)
        }

        while let line = await readInputLine() {
            let words = line.split(separator: " ").map(String.init)
            guard let command = words.first else { continue }
            do {
                switch command {
                case "store" where words.count == 3:
                    let asset = try await store(words[1], size: Int(words[2]) ?? 0)
                    stored[words[1]] = asset
                    emitLine("stored \(words[1]) \(asset.digest)")
                case "commit" where words.count == 2:
                    guard let asset = stored[words[1]] else { throw WorkerUsageError("nothing stored as \(words[1])") }
                    mirror.dataModel.append(AssetRecord(id: words[1], file: asset))
                    try await mirror.flush()
                    emitLine("committed \(words[1])")
                case "delete" where words.count == 2:
                    mirror.dataModel.removeAll { $0.id == words[1] }
                    try await mirror.flush()
                    emitLine("deleted \(words[1])")
                case "loop" where words.count == 3:
                    let count = Int(words[1]) ?? 0, size = Int(words[2]) ?? 1
                    for number in 0..<count {
                        let name = "l\(number)"
                        let asset = try await store(name, size: size / 2 + (number * 7919) % (size / 2 + 1))
                        mirror.dataModel.append(AssetRecord(id: name, file: asset))
                        try await mirror.flush()
                        emitLine("committed \(name)")
                    }
                case "quit":
                    return
                default:
                    throw WorkerUsageError("unknown command \(line)")
                }
            } catch {
                emitLine("error \(error)")
            }
        }
    }
}

/// A record that carries an asset; the tests read the same JSON with their own copy.
struct AssetRecord: Recordable {
    var id: String
    var file: Asset
}
