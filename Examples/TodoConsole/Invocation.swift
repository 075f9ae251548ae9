import Foundation

/// The command line, parsed.
struct Invocation {
    enum Command: String, CaseIterable {
        case add, list, done, undone, edit, remove, clear, watch, help
    }

    var command: Command
    var arguments: [String]
    var databaseDirectory: URL?
    var isPrivate = false
    var json = false

    static let usage = """
        usage: mirror-todo [--db DIR] [--private] [--json] <command> [arguments]

        commands:
          add TITLE          add an item
          list               list the items, numbered
          done ID            mark an item done (ID: the number shown by list, or the full id)
          undone ID          mark an item not done
          edit ID TITLE      change an item's title
          remove ID          remove an item
          clear              remove every item
          watch              print every change, by any process, until interrupted

        options:
          --db DIR           the database directory (default: $MAGICMIRROR_DIRECTORY or the
                             per-user data directory)
          --private          use your private list instead of the public one
          --json             print JSON: list → one array; add → one object; watch → one
                             object per change and line
        """

    static func parse(_ words: [String]) throws -> Invocation {
        var databaseDirectory: URL?
        var isPrivate = false
        var json = false
        var positional: [String] = []
        var index = 0
        while index < words.count {
            let word = words[index]
            switch word {
            case "--db":
                index += 1
                guard index < words.count, !words[index].isEmpty else {
                    throw UsageError("--db needs a directory")
                }
                databaseDirectory = URL(fileURLWithPath: words[index], isDirectory: true)
            case "--private": isPrivate = true
            case "--json": json = true
            case "--help", "-h": positional.insert("help", at: 0)
            case "--":
                positional.append(contentsOf: words[(index + 1)...])
                index = words.count
            default:
                if word.hasPrefix("--") { throw UsageError("unknown option \(word)") }
                positional.append(word)
            }
            index += 1
        }
        guard let name = positional.first else {
            throw UsageError("missing command (one of: \(Command.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        guard let command = Command(rawValue: name) else {
            throw UsageError(
                "unknown command '\(name)' (one of: \(Command.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let arguments = Array(positional.dropFirst())
        let expected: (Int, String)? = switch command {
        case .add: (1, "add needs a TITLE")
        case .done, .undone, .remove: (1, "\(command.rawValue) needs an ID")
        case .edit: (2, "edit needs an ID and a TITLE")
        case .list, .clear, .watch, .help: nil
        }
        if let (count, message) = expected {
            guard arguments.count >= count else { throw UsageError(message) }
            guard arguments.count == count else {
                throw UsageError("\(command.rawValue) takes \(count) argument\(count == 1 ? "" : "s"); quote a title with spaces")
            }
            if command == .add || command == .edit, arguments.last!.trimmingCharacters(in: .whitespaces).isEmpty {
                throw UsageError("the title is empty")
            }
        } else if !arguments.isEmpty {
            throw UsageError("\(command.rawValue) takes no arguments")
        }
        return Invocation(
            command: command, arguments: arguments, databaseDirectory: databaseDirectory,
            isPrivate: isPrivate, json: json)
    }
}

/// A mistake on the command line.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
