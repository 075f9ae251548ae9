import Foundation
import MagicMirror
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The to-do console that `mirror-todo` and `mirror-todo-postgres` run: a shared list that
/// several processes edit live, whatever database it lives in.
///
/// For example, `main.swift` of an executable:
///
/// ```swift
/// import TodoConsoleKit
///
/// await TodoConsole.main(program: "mirror-todo", storage: .jsonFiles)
/// ```
public enum TodoConsole {
    /// Runs the command on the command line, prints its output and exits: status 0 on
    /// success, 1 when the command failed, 2 for a mistake on the command line. Every
    /// failure is one line on standard error, starting with `program:`.
    ///
    /// - Parameters:
    ///   - program: The executable's name, for the usage text and messages.
    ///   - storage: Where the list lives and the option that chooses the place.
    ///   - arguments: The command line without the program's name.
    /// - Returns: Never: it exits the process.
    public static func main(
        program: String, storage: TodoStorage, arguments: [String] = Array(CommandLine.arguments.dropFirst())
    ) async -> Never {
        let invocation: Invocation
        do {
            invocation = try Invocation.parse(arguments, storage: storage)
        } catch {
            fail(error, program: program, code: 2)
        }
        do {
            try await Command(invocation: invocation, program: program, storage: storage).run()
            exit(0)
        } catch {
            fail(error, program: program, code: 1)
        }
    }

    /// Prints `error` as one line, `program: message`, and exits with `code`.
    static func fail(_ error: any Error, program: String, code: Int32) -> Never {
        var message: String
        switch error {
        case let error as MirrorError:
            message = error.message
            // Why the system refused (the errno text), and the file unless already named.
            if let reason = systemReason(of: error.underlying), !message.contains(reason) {
                message += ": \(reason)"
            }
            if let file = error.file, !message.contains(file) { message += " (\(file))" }
        default:
            message = String(describing: error)
        }
        let hint = error is UsageError ? "; run '\(program) help' for usage" : ""
        FileHandle.standardError.write(Data("\(program): \(message)\(hint)\n".utf8))
        exit(code)
    }

    /// The operating system's text for the errno behind `error` (for example "Not a
    /// directory"), found through the chain of underlying errors.
    static func systemReason(of error: (any Error)?) -> String? {
        var next = error.map { $0 as NSError }
        while let current = next {
            if current.domain == NSPOSIXErrorDomain, current.code > 0 {
                return String(cString: strerror(Int32(current.code)))
            }
            // A POSIXError on Linux, an NSError on Darwin: both are errors.
            next = (current.userInfo[NSUnderlyingErrorKey] as? any Error).map { $0 as NSError }
        }
        return nil
    }
}

/// One command of the console, run against the storage it names.
struct Command {
    let invocation: Invocation
    let program: String
    let storage: TodoStorage

    func run() async throws {
        if invocation.command == .help {
            print(Invocation.usage(program: program, storage: storage))
            return
        }
        // Reading a list that was never written creates nothing: no directory, no file.
        if invocation.command == .list, storage.holdsNoDatabase(invocation.location) {
            printList([])
            return
        }
        let opened = try await storage.open(invocation.location)
        do {
            try await run(opened)
            await opened.close()
        } catch {
            await opened.close()
            throw error
        }
    }

    private func run(_ opened: TodoStorage.Opened) async throws {
        let mirror = try await Mirror<Todo>(
            database: opened.database, scope: invocation.isPrivate ? .private : .public,
            user: invocation.isPrivate ? opened.privateUser : nil)
        switch invocation.command {
        case .help: break
        case .list:
            printList(mirror.dataModel.array)
        case .add:
            let todo = Todo(title: invocation.arguments[0])
            mirror.dataModel.append(todo)
            try await mirror.flush()
            report(todo, in: mirror.dataModel.array, verb: "added")
        case .done, .undone:
            // Edit by id, not by index: another process may change the list meanwhile.
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            mirror.dataModel[recordID: id]?.done = invocation.command == .done
            try await mirror.flush()
            report(
                try stillThere(id, in: mirror), in: mirror.dataModel.array,
                verb: invocation.command == .done ? "done" : "not done")
        case .edit:
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            mirror.dataModel[recordID: id]?.title = invocation.arguments[1]
            try await mirror.flush()
            report(try stillThere(id, in: mirror), in: mirror.dataModel.array, verb: "edited")
        case .remove:
            let id = try resolve(invocation.arguments[0], in: mirror.dataModel.array)
            let before = mirror.dataModel.array
            guard let removed = mirror.dataModel.remove(recordID: id) else {
                throw ConsoleError("item \(id) was removed by another process")
            }
            try await mirror.flush()
            report(removed, in: before, verb: "removed")
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
            try await watch(mirror, location: opened.location)
        }
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
        let ordered = Todo.numbered(todos)
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
            throw ConsoleError("no item with id \(reference.terminalSafe)")
        }
        return id
    }

    private func printList(_ todos: [Todo]) {
        let ordered = Todo.numbered(todos)
        if invocation.json {
            printJSON(ordered.enumerated().map { $1.jsonObject(number: $0 + 1) })
            return
        }
        if ordered.isEmpty {
            print("the list is empty; add an item with: \(program) add TITLE")
            return
        }
        let width = String(ordered.count).count
        for (offset, todo) in ordered.enumerated() {
            print(todo.line(number: offset + 1, width: width))
        }
    }

    /// Prints the item a command changed, numbered as in `list` (in `list` before a remove).
    private func report(_ todo: Todo, in todos: [Todo], verb: String) {
        let number = (Todo.numbered(todos).firstIndex { $0.id == todo.id } ?? 0) + 1
        if invocation.json {
            printJSON(todo.jsonObject(number: number))
        } else {
            print("\(verb) \(todo.line(number: number))")
        }
    }

    /// Prints the list, then every change made by any process, until SIGINT or SIGTERM.
    private func watch(_ mirror: Mirror<Todo>, location: String) async throws {
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
        printer.start(with: mirror.dataModel.array, emptyHint: "the list is empty; add an item with: \(program) add TITLE")
        let observation = mirror.observe { todos in printer.show(todos) }
        // Failures while watching (a lost connection, a refused change) are one line each on
        // standard error; watching goes on, and the list catches up when the cause passes.
        let program = program
        let failures = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) { note in
            guard let error = note.object as? MirrorError else { return }
            FileHandle.standardError.write(Data("\(program): \(error.message)\n".utf8))
        }
        defer { NotificationCenter.default.removeObserver(failures) }
        let legend = invocation.json ? "" : "; + added, ~ changed, - removed, with the number list shows"
        FileHandle.standardError.write(Data("watching \(location)\(legend) (Ctrl-C to stop)\n".utf8))
        for await _ in stopped { break }
        observation.cancel()
        sources.forEach { $0.cancel() }
    }
}

/// Prints the list `watch` starts from, then the difference between successive values of
/// the list, one line per changed item, numbered as `list` numbers them.
final class ChangePrinter: Sendable {
    private let json: Bool
    private let previous = Mutex<[Todo]>([])

    init(json: Bool) { self.json = json }

    /// Prints the list as it is when watching starts.
    func start(with todos: [Todo], emptyHint: String) {
        let ordered = Todo.numbered(todos)
        previous.withLock { $0 = ordered }
        var lines: [String] = []
        for (offset, todo) in ordered.enumerated() {
            lines.append(line("listed", todo, number: offset + 1, width: String(ordered.count).count))
        }
        if lines.isEmpty, !json { lines.append(emptyHint) }
        write(lines)
    }

    func show(_ todos: [Todo]) {
        let current = Todo.numbered(todos)
        let before = previous.withLock { previous in
            defer { previous = current }
            return previous
        }
        let old = Dictionary(before.enumerated().map { ($1.recordID, (number: $0 + 1, todo: $1)) }) { $1 }
        let now = Set(current.map(\.recordID))
        var lines: [String] = []
        for (id, entry) in old.sorted(by: { $0.value.number < $1.value.number }) where !now.contains(id) {
            lines.append(line("removed", entry.todo, number: entry.number))
        }
        for (offset, todo) in current.enumerated() {
            if let entry = old[todo.recordID] {
                if entry.todo != todo { lines.append(line("updated", todo, number: offset + 1)) }
            } else {
                lines.append(line("inserted", todo, number: offset + 1))
            }
        }
        write(lines)
    }

    private func write(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        // Written straight to the file descriptor, so a pipe reader sees each change at once.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    private func line(_ change: String, _ todo: Todo, number: Int, width: Int = 1) -> String {
        if json {
            var object = todo.jsonObject(number: number)
            object["change"] = change
            return jsonLine(object)
        }
        let symbol = ["listed": "", "inserted": "+ ", "updated": "~ ", "removed": "- "][change] ?? ""
        return symbol + todo.line(number: number, width: width)
    }
}

/// A failure the user can fix, printed as one line.
struct ConsoleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func jsonLine(_ value: Any) -> String {
    // Only objects of strings, numbers and booleans are printed: serialization cannot fail.
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]))
        ?? Data("null".utf8)
    return String(decoding: data, as: UTF8.self)
}

func printJSON(_ value: Any) {
    print(jsonLine(value))
}
