import Dispatch
import Foundation
import MagicMirror

/// `mirror-worker versions`: a mirror of one version of the `Task` record type, so that a
/// test can run an older and a newer version of an app side by side on one JSON-file
/// database, and migrate its records.
///
/// ```
/// mirror-worker versions --db DIR --schema 1|2 [--batch N] [--crash-at OPERATION:CALL[:BYTES]]
/// ```
///
/// - `--schema 1`: `Task { id, title }`, no migrations. `--schema 2`: `Task { id, title,
///   priority = 0 }` with the migration `.add("priority", default: 0)`.
/// - `--batch`: the mirror's `maximumBatchSize` (also the batch of `migrate`).
/// - `--crash-at`: see `mirror-worker write`.
///
/// Output, one line each: `ready <writerID>`; `state <json>`, the records as a JSON array
/// (sorted keys, in `dataModel` order), first when loaded and then after changes;
/// `ok <command>` once a command was applied; `migrated <count>` before the `ok` of
/// `migrate`; `error <message>` for a command that failed or an error the mirror reported.
///
/// Commands: `add <id> <title…>`, `title <id> <title…>`, `priority <id> <n>` (schema 2),
/// `flush`, `migrate` (`migrateStoredRecords()`), `quit`.
enum VersionsCommand {
    /// What every version of `Task` has.
    protocol Titled { var title: String { get set } }

    struct TaskV1: Recordable, Titled {
        static var recordType: String { "Task" }
        var id: String
        var title: String
    }

    struct TaskV2: Recordable, Titled {
        static var recordType: String { "Task" }
        static let migrations: [RecordMigration] = [.add("priority", default: 0)]
        var id: String
        var title: String
        var priority = 0
    }

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, usage: "mirror-worker versions --db DIR --schema 1|2 [--batch N] [--crash-at OP:CALL[:BYTES]]")
        let database = try options.openDatabase(try options.required("db"))
        try options.armCrash()
        let configuration = MirrorConfiguration(maximumBatchSize: try options.int("batch", default: 256))
        switch try options.int("schema", default: 1) {
        case 1:
            try await serve(try await Mirror<TaskV1>(database: database, configuration: configuration), database) {
                mirror, command in
                guard command.name == "add", let title = command.rest else { return false }
                mirror.dataModel.append(TaskV1(id: command.id, title: title))
                return true
            }
        default:
            try await serve(try await Mirror<TaskV2>(database: database, configuration: configuration), database) {
                mirror, command in
                switch command.name {
                case "add":
                    guard let title = command.rest else { return false }
                    mirror.dataModel.append(TaskV2(id: command.id, title: title))
                case "priority":
                    guard let priority = command.rest.flatMap({ Int($0) }), mirror.dataModel[recordID: command.id] != nil
                    else { return false }
                    mirror.dataModel[recordID: command.id]?.priority = priority
                default:
                    return false
                }
                return true
            }
        }
    }

    struct Command {
        var name: String
        var id: String
        var rest: String?
    }

    /// Applies the commands every version shares; `special` the others. (`mirror-worker
    /// sealed` serves its mirror with it too.)
    static func serve<Record: Recordable & Titled>(
        _ mirror: Mirror<Record>, _ database: JSONFileDatabase,
        special: (Mirror<Record>, Command) throws -> Bool
    ) async throws {
        let output = LineWriter()
        output.write("ready \(database.writerID)")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let observation = mirror.observe { records in
            let json = (try? encoder.encode(records)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
            output.write("state \(json)")
        }
        defer { observation.cancel() }
        let errors = Task {
            for await error in mirror.errors() { output.write("error \(error)") }
        }
        defer { errors.cancel() }
        while let line = await readInputLine() {
            let words = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard let name = words.first else { continue }
            let command = Command(name: name, id: words.count > 1 ? words[1] : "", rest: words.count > 2 ? words[2] : nil)
            do {
                switch name {
                case "title":
                    guard let title = command.rest, mirror.dataModel[recordID: command.id] != nil
                    else { throw WorkerUsageError("bad command \(line)") }
                    mirror.dataModel[recordID: command.id]?.title = title
                case "flush":
                    try await mirror.flush()
                case "migrate":
                    output.write("migrated \(try await mirror.migrateStoredRecords())")
                case "quit":
                    return
                default:
                    guard try special(mirror, command) else { throw WorkerUsageError("bad command \(line)") }
                }
                output.write("ok \(line)")
            } catch {
                output.write("error \(error)")
            }
        }
    }
}
