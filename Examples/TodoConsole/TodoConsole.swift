import Foundation
import MagicMirror
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs one command of `mirror-todo`.
struct TodoConsole {
    let invocation: Invocation

    init(_ invocation: Invocation) { self.invocation = invocation }

    func run() async throws {
        if invocation.command == .help {
            print(Invocation.usage)
            return
        }
        let scope: Scope = invocation.isPrivate ? .private : .public
        let mirror: Mirror<Todo>
        let directory: URL
        if let chosen = invocation.databaseDirectory {
            directory = chosen
            mirror = try await Mirror(database: JSONFileDatabase(directory: chosen), scope: scope)
        } else {
            // The embedded default database: $MAGICMIRROR_DIRECTORY or the per-user data directory.
            directory = JSONFileDatabase.defaultDirectory
            mirror = try await Mirror(scope: scope)
        }
        switch invocation.command {
        case .help: break
        case .list:
            printList(mirror.dataModel.array)
        case .add:
            let todo = Todo(title: invocation.arguments[0])
            mirror.dataModel.append(todo)
            try await mirror.flush()
            if invocation.json {
                printJSON(todo.jsonObject)
            } else {
                let number = sorted(mirror.dataModel.array).firstIndex { $0.id == todo.id }.map { $0 + 1 } ?? 0
                print("added \(number). \(todo.title)  (\(todo.recordID))")
            }
        case .done, .undone:
            // Edit by id, not by index: another process may change the list meanwhile.
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            mirror.dataModel[recordID: id]?.done = invocation.command == .done
            try await mirror.flush()
            report(try stillThere(id, in: mirror), verb: invocation.command == .done ? "done" : "not done")
        case .edit:
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            mirror.dataModel[recordID: id]?.title = invocation.arguments[1]
            try await mirror.flush()
            report(try stillThere(id, in: mirror), verb: "edited")
        case .remove:
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            guard let removed = mirror.dataModel.remove(recordID: id) else {
                throw ConsoleError("item \(id) was removed by another process")
            }
            try await mirror.flush()
            report(removed, verb: "removed")
        case .clear:
            let count = mirror.dataModel.count
            mirror.dataModel.removeAll()
            try await mirror.flush()
            if invocation.json {
                printJSON(["removed": count])
            } else {
                print("removed \(count) item\(count == 1 ? "" : "s")")
            }
        case .watch:
            try await watch(mirror, directory: directory)
        }
    }

    /// The items in the order `list` numbers them: oldest first.
    private func sorted(_ todos: [Todo]) -> [Todo] {
        todos.sorted { ($0.created, $0.recordID) < ($1.created, $1.recordID) }
    }

    /// The item `id`, unless another process removed it meanwhile.
    private func stillThere(_ id: String, in mirror: Mirror<Todo>) throws -> Todo {
        guard let todo = mirror.dataModel[recordID: id] else {
            throw ConsoleError("item \(id) was removed by another process")
        }
        return todo
    }

    /// The record id of the item named by `reference`: a number shown by `list`, or a full
    /// record id.
    private func resolve(_ reference: String, in todos: [Todo]) throws -> String {
        let ordered = sorted(todos)
        var id: String?
        if let number = Int(reference) {
            guard number >= 1, number <= ordered.count else {
                throw ConsoleError("no item number \(number) (the list has \(ordered.count) item\(ordered.count == 1 ? "" : "s"))")
            }
            id = ordered[number - 1].recordID
        } else {
            id = todos.first { $0.recordID.caseInsensitiveCompare(reference) == .orderedSame }?.recordID
        }
        guard let id else {
            throw ConsoleError("no item with id \(reference)")
        }
        return id
    }

    private func printList(_ todos: [Todo]) {
        let ordered = sorted(todos)
        if invocation.json {
            printJSON(ordered.map(\.jsonObject))
            return
        }
        if ordered.isEmpty {
            print("the list is empty; add an item with: mirror-todo add TITLE")
            return
        }
        let width = String(ordered.count).count
        for (offset, todo) in ordered.enumerated() {
            let number = String(offset + 1).leftPadded(to: width)
            print("\(number). [\(todo.done ? "x" : " ")] \(todo.title)  (\(todo.recordID))")
        }
    }

    private func report(_ todo: Todo, verb: String) {
        if invocation.json {
            printJSON(todo.jsonObject)
        } else {
            print("\(verb): [\(todo.done ? "x" : " ")] \(todo.title)  (\(todo.recordID))")
        }
    }

    /// Prints every change made by any process until SIGINT or SIGTERM.
    private func watch(_ mirror: Mirror<Todo>, directory: URL) async throws {
        let (stopped, stop) = AsyncStream.makeStream(of: Int32.self)
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber)
            source.setEventHandler { stop.yield(signalNumber) }
            source.resume()
            sources.append(source)
        }
        let printer = ChangePrinter(json: invocation.json)
        let observation = mirror.observe { todos in printer.show(todos) }
        FileHandle.standardError.write(Data("watching \(directory.path) (Ctrl-C to stop)\n".utf8))
        for await _ in stopped { break }
        observation.cancel()
        sources.forEach { $0.cancel() }
    }

    static func fail(_ error: any Error, code: Int32) -> Never {
        let message: String
        switch error {
        case let error as MirrorError: message = error.message + (error.file.map { " (\($0))" } ?? "")
        default: message = String(describing: error)
        }
        let hint = error is UsageError ? "; run 'mirror-todo help' for usage" : ""
        FileHandle.standardError.write(Data("mirror-todo: \(message)\(hint)\n".utf8))
        exit(code)
    }
}

/// Prints the difference between successive values of the list, one line per change.
final class ChangePrinter: Sendable {
    private let json: Bool
    private let previous = Mutex<[String: Todo]?>(nil)

    init(json: Bool) { self.json = json }

    func show(_ todos: [Todo]) {
        let current = Dictionary(todos.map { ($0.recordID, $0) }, uniquingKeysWith: { $1 })
        let before = previous.withLock { previous in
            defer { previous = current }
            return previous
        }
        guard let before else { return }  // the first value is the list as it was
        var lines: [String] = []
        for todo in todos.sorted(by: { ($0.created, $0.recordID) < ($1.created, $1.recordID) }) {
            if let old = before[todo.recordID] {
                if old != todo { lines.append(line("updated", todo)) }
            } else {
                lines.append(line("inserted", todo))
            }
        }
        for (id, old) in before where current[id] == nil {
            lines.append(line("removed", old))
        }
        guard !lines.isEmpty else { return }
        // Written straight to the file descriptor, so a pipe reader sees each change at once.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    private func line(_ change: String, _ todo: Todo) -> String {
        if json {
            var object: [String: Any] = ["change": change, "id": todo.recordID]
            if change != "removed" {
                object["title"] = todo.title
                object["done"] = todo.done
            }
            return jsonLine(object)
        }
        let symbol = ["inserted": "+", "updated": "~", "removed": "-"][change]!
        return "\(symbol) [\(todo.done ? "x" : " ")] \(todo.title)  (\(todo.recordID))"
    }
}

/// A failure the user can fix, printed as one line.
struct ConsoleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func jsonLine(_ value: Any) -> String {
    let data = try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
    return String(decoding: data, as: UTF8.self)
}

func printJSON(_ value: Any) {
    print(jsonLine(value))
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
