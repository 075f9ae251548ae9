// pg-mirror-worker: one real process of the multi-process tests. It mirrors the public
// `Item` zone of a PostgreSQL database, appends, edits and deletes its own items, waits
// until its mirror shows every worker's final state, and prints one JSON line:
//   {"converged":true,"remoteInserts":N,"duplicateEvents":D}
// where D counts remote inserts or removals of one record seen more than once.
//
//   pg-mirror-worker URL NAME COUNT WORKER-NAMES (comma separated)
//
// `pg-mirror-worker --interactive URL [REPLICA-DIRECTORY]`, `pg-mirror-worker --sharing URL
// private|shared`, `pg-mirror-worker --offline-first URL REPLICA-DIRECTORY` and
// `pg-mirror-worker --photos URL` are mirrors driven from standard input
// instead (InteractiveWorker.swift, PhotoWorker.swift); `pg-mirror-worker --delete-author URL
// ID` deletes one author (DeleteAuthorWorker.swift).
import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import MirrorTesting
import Synchronization

struct Item: Recordable {
    static let recordType = "Item"
    var id: String
    var value: Int
}

// A write to a connection the server just closed raises SIGPIPE, which would end the
// process; as in every SwiftNIO program on Linux, ignore it and get the error instead.
signal(SIGPIPE, SIG_IGN)

let arguments = CommandLine.arguments
/// Runs one of the modes driven from standard input (or a one-shot command) and exits: 0 when
/// it returns, 1 with its error on standard error when it throws.
func runMode(_ flag: String, _ body: () async throws -> Void) async -> Never {
    do {
        try await body()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("pg-mirror-worker \(flag): \(error)\n".utf8))
        exit(1)
    }
}

if arguments.count >= 3, arguments[1] == "--interactive" {
    await runMode("--interactive") {
        try await InteractiveWorker.run(url: arguments[2], replica: arguments.count > 3 ? arguments[3] : nil)
    }
}
if arguments.count == 4, arguments[1] == "--offline-first" {
    await runMode("--offline-first") { try await InteractiveWorker.runOfflineFirst(url: arguments[2], replica: arguments[3]) }
}
if arguments.count == 4, arguments[1] == "--delete-author" {
    await runMode("--delete-author") { try await DeleteAuthorWorker.run(url: arguments[2], authorID: arguments[3]) }
}
if arguments.count == 4, arguments[1] == "--sharing", let scope = Scope(rawValue: arguments[3]) {
    await runMode("--sharing") { try await InteractiveWorker.run(url: arguments[2], replica: nil, scope: scope) }
}
if arguments.count == 3, arguments[1] == "--photos" {
    await runMode("--photos") { try await PhotoWorker.run(url: arguments[2]) }
}
guard arguments.count == 5, let count = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: pg-mirror-worker URL NAME COUNT WORKERS\n".utf8))
    exit(2)
}
let url = arguments[1]
let name = arguments[2]
let workers = arguments[4].split(separator: ",").map(String.init)
let started = ContinuousClock.now

/// One line of progress on standard error, which a test shows when the worker fails.
@Sendable func progress(_ step: String) {
    FileHandle.standardError.write(Data("\(name) \(ContinuousClock.now - started): \(step)\n".utf8))
}

/// Every worker's items once all are done: the odd ones, edited to 1 (the even ones are deleted).
let expected = Set(workers.flatMap { worker in (0..<count).filter { $0 % 2 == 1 }.map { "\(worker)-\($0)" } })

do {
    // The server may be restarting: retry opening for up to a minute.
    let deadline = ContinuousClock.now + .seconds(60)
    var opened: (PostgreSQLDatabase, Mirror<Item>)?
    while opened == nil {
        do {
            let database = try await PostgreSQLDatabase(url: url)
            opened = (database, try await Mirror<Item>(database: database))
        } catch let error as MirrorError where error.kind.isTransient && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
        }
    }
    guard let (database, mirror) = opened else { exit(1) }
    progress("opened")
    let errorLog = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) { note in
        progress("error: \(note.object.map { "\($0)" } ?? "?")")
    }
    let events = Mutex<[String: Int]>([:])
    let changes = mirror.changes()
    let watcher = Task {
        for await change in changes where change.origin == .remote {
            switch change.kind {
            case .inserted: events.withLock { $0["insert \(change.recordID)", default: 0] += 1 }
            case .removed: events.withLock { $0["remove \(change.recordID)", default: 0] += 1 }
            default: break
            }
        }
    }
    for index in 0..<count { mirror.dataModel.append(Item(id: "\(name)-\(index)", value: 0)) }
    try await mirror.waitUntilCommitted(timeout: .seconds(120))
    progress("appends committed")
    // By id, each in one access: other workers' commits arrive meanwhile and move positions
    // (an index read first and used next trapped once, out of range).
    for index in 0..<count { mirror.dataModel[recordID: "\(name)-\(index)"]?.value = 1 }
    try await mirror.waitUntilCommitted(timeout: .seconds(120))
    progress("edits committed")
    for index in stride(from: count - 1, through: 0, by: -1) where index % 2 == 0 {
        mirror.dataModel.remove(recordID: "\(name)-\(index)")
    }
    try await mirror.waitUntilCommitted(timeout: .seconds(120))
    progress("deletes committed")
    try await mirror.waitUntil(timeout: .seconds(120), "every worker's final state") { items in
        Set(items.map(\.id)) == expected && items.allSatisfy { $0.value == 1 }
    }
    progress("converged")
    NotificationCenter.default.removeObserver(errorLog)
    watcher.cancel()
    let seen = events.withLock { $0 }
    let inserts = seen.filter { $0.key.hasPrefix("insert ") }.count
    let duplicates = seen.values.filter { $0 > 1 }.count
    print(#"{"converged":true,"remoteInserts":\#(inserts),"duplicateEvents":\#(duplicates)}"#)
    await database.close()
} catch {
    print(#"{"converged":false,"error":"\#(String(describing: error).replacingOccurrences(of: "\"", with: "'"))"}"#)
    exit(1)
}
