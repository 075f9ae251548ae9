import Foundation
import MagicMirror
import MirrorTesting

/// `mirror-worker sealed`: a private mirror of `Note` records sealed with `InsecureTestCipher`,
/// so that a test can check what reaches the files, open the records with a wrong key, rotate
/// keys and merge conflicting edits between processes.
///
/// ```
/// mirror-worker sealed --db DIR --user NAME --key ID:SECRET [--older ID:SECRET,...]
/// ```
///
/// - `--key`: the key the cipher seals with; `--older`: keys it opens with too.
///
/// Output and commands are those of `mirror-worker versions` (`title <id> <text…>`,
/// `flush`, `migrate`, `quit`), plus `add <id> <title…>` and `body <id> <text…>`; an error
/// the mirror reported while loading is printed first.
enum SealedCommand {
    struct Note: Recordable, VersionsCommand.Titled {
        var id: String
        var title: String
        var body = ""
    }

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, usage: "mirror-worker sealed --db DIR --user NAME --key ID:SECRET [--older ID:SECRET,...]")
        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: try options.required("db")))
        let (keyID, secret) = try key(try options.required("key"))
        var older: [String: String] = [:]
        for pair in (options.string("older") ?? "").split(separator: ",") {
            let (id, secret) = try key(String(pair))
            older[id] = secret
        }
        let cipher = InsecureTestCipher(keyID: keyID, secret: secret, olderKeys: older)
        let mirror = try await Mirror<Note>(
            database: database, scope: .private, user: try MirrorUser(name: try options.required("user")),
            configuration: MirrorConfiguration(retryDelay: .milliseconds(20), cipher: cipher))
        // A record that does not open is reported while the mirror loads, before `serve`
        // listens to its errors.
        if let error = mirror.lastError { emitLine("error \(error)") }
        try await VersionsCommand.serve(mirror, database) { mirror, command in
            guard let text = command.rest else { return false }
            switch command.name {
            case "add":
                mirror.dataModel.append(Note(id: command.id, title: text))
            case "body":
                guard mirror.dataModel[recordID: command.id] != nil else { return false }
                mirror.dataModel[recordID: command.id]?.body = text
            default:
                return false
            }
            return true
        }
    }

    private static func key(_ option: String) throws -> (id: String, secret: String) {
        let parts = option.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw WorkerUsageError("a key is ID:SECRET, not \(option)") }
        return (parts[0], parts[1])
    }
}
