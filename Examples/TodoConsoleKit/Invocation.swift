import Foundation

/// The command line, parsed.
struct Invocation {
    enum Command: String, CaseIterable {
        case add, list, done, undone, edit, remove, clear, watch, help
    }

    var command: Command
    var arguments: [String]
    /// The value of the storage option (`--db DIR`, `--url URL`), if given.
    var location: String?
    var isPrivate = false
    var json = false

    static func usage(program: String, storage: TodoStorage) -> String {
        let option = "\(storage.option) \(storage.placeholder)"
        return """
            usage: \(program) [\(option)] [--private] [--json] <command> [arguments]

            commands:
              add TITLE          add an item
              list               list the items, numbered
              done ID            mark an item done
              undone ID          mark an item not done
              edit ID TITLE      change an item's title
              remove ID          remove an item
              clear              remove every item
              watch              print the list, then every change by any process, until
                                 interrupted (Ctrl-C):
                                   + N. item   added      ~ N. item   changed
                                   - N. item   removed (N: the number it had)

            numbers: ID is the number list shows, or the item's id (printed in parentheses).
              Numbers are positions in the list, oldest item first: removing an item
              renumbers the items after it, in every terminal. watch prints each change
              with the item's current number; an id always names the same item.

            options:
              \(option.padding(toLength: max(17, option.count), withPad: " ", startingAt: 0))  \(
                  storage.help.replacingOccurrences(of: "\n", with: "\n" + String(repeating: " ", count: 21)))
              --private          use your private list instead of the public one
              --json             print JSON instead of text; every item is an object
                                 {"number", "id", "title", "done", "created" (ISO 8601)}:
                                   list                  one array of items
                                   add, done, undone,    the item
                                   edit, remove          (remove: with the number it had)
                                   clear                 {"removed": COUNT}
                                   watch                 one item per line, with "change":
                                                         "listed" (the list at start), then
                                                         "inserted", "updated" or "removed"
              --help, -h         print this help
            """
    }

    static func parse(_ words: [String], storage: TodoStorage) throws -> Invocation {
        var location: String?
        var isPrivate = false
        var json = false
        var positional: [String] = []
        var index = 0
        while index < words.count {
            let word = words[index]
            switch word {
            case storage.option:
                index += 1
                guard index < words.count, !words[index].isEmpty else {
                    throw UsageError("\(storage.option) needs a \(storage.placeholder)")
                }
                location = words[index]
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
            command: command, arguments: arguments, location: location,
            isPrivate: isPrivate, json: json)
    }
}

/// A mistake on the command line.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
