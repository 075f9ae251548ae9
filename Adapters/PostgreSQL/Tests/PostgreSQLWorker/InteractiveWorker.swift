import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import MirrorTesting

/// A record of the two-hosts test: three fields, so that a merge by field shows.
struct Note: Recordable {
    static let recordType = "Note"
    var id: String
    var title = ""
    var note = ""
    var count = 0
}

/// `pg-mirror-worker --interactive URL [REPLICA-DIRECTORY]`: a mirror of the public `Note`
/// zone driven line by line from standard input, for tests that change the network under
/// it (the two-hosts test). With a replica directory, the mirror runs on a
/// `ReplicatedDatabase` (a local JSON-file replica and outbox) over the server, as an app
/// that works offline does.
///
/// Each command gets one line: `ok …` or `error …`.
///
///     append ID              a new note
///     set ID FIELD VALUE     title, note (text) or count (a number)
///     remove ID
///     committed              waits until nothing is pending (in the replica, with one)
///     failing                waits until a pending change has failed at least once
///     await JSON             waits until the notes, by id, are the JSON array given
///     state                  prints the notes as a JSON array, by id
///     flush                  `flush()`: its error, if it throws
///     share ID USER ACCESS   shares a note of a private mirror (ACCESS: readOnly, readWrite)
///     revoke ID USER         ends that share
///     status                 (offline-first) the replica's phase and pending changes
///     pushed                 (offline-first) waits until online with nothing pending
///
/// `pg-mirror-worker --sharing URL private|shared`: the same, on the private or shared zone
/// of the URL's role.
///
/// `pg-mirror-worker --offline-first URL REPLICA-DIRECTORY`: the same on a replica over a
/// ``DeferredPostgreSQLDatabase``, as an app that must start while the server is away does:
/// ready at once, whether or not the server answers.
enum InteractiveWorker {
    /// How long a waiting command waits.
    static let timeout = Duration.seconds(240)

    static func run(url: String, replica: String?, scope: Scope = .public) async throws {
        let server = try await openRetrying(url)
        let database: any RecordDatabase
        if let replica {
            database = ReplicatedDatabase(
                local: try JSONFileDatabase(directory: URL(fileURLWithPath: replica)), remote: server,
                retryDelay: .milliseconds(100), maximumRetryDelay: .seconds(1))
        } else {
            database = server
        }
        // Retries come quickly after the network heals.
        let mirror = try await Mirror<Note>(
            database: database, scope: scope, user: scope == .public ? nil : try MirrorUser(name: server.role),
            configuration: MirrorConfiguration(retryDelay: .milliseconds(100), maximumRetryDelay: .seconds(1)))
        answer("ok ready \(database.writerID)")
        await serve { line in try await perform(line, on: mirror) }
        await server.close()
    }

    static func runOfflineFirst(url: String, replica: String) async throws {
        let remote = try DeferredPostgreSQLDatabase(url: url)
        let database = ReplicatedDatabase(
            local: try JSONFileDatabase(directory: URL(fileURLWithPath: replica)), remote: remote,
            retryDelay: .milliseconds(100), maximumRetryDelay: .seconds(1))
        let mirror = try await Mirror<Note>(
            database: database,
            configuration: MirrorConfiguration(retryDelay: .milliseconds(100), maximumRetryDelay: .seconds(1)))
        answer("ok ready \(database.writerID)")
        await serve { line in
            switch line {
            case "status":
                let status = database.status
                return "ok \(status.phase) \(status.pendingChanges)"
            case "pushed":
                try await database.statusUpdates.waitUntil(timeout: timeout, "online with nothing pending") {
                    $0.phase == .online && $0.pendingChanges == 0
                }
                return "ok"
            default:
                return try await perform(line, on: mirror)
            }
        }
        await remote.close()
    }

    /// Answers each line of standard input with `perform`'s answer, or `error …` when it
    /// throws, until the input ends.
    static func serve(_ perform: (String) async throws -> String) async {
        // Standard input is read on a thread of its own: a blocking read must not hold one
        // of the few threads that tasks (the mirror's among them) run on.
        let (lines, input) = AsyncStream.makeStream(of: String.self)
        Thread.detachNewThread {
            while let line = readLine() { input.yield(line) }
            input.finish()
        }
        for await line in lines {
            do {
                answer(try await perform(line))
            } catch {
                answer("error \(String(describing: error).replacingOccurrences(of: "\n", with: " "))")
            }
        }
    }

    /// Opens the server, retrying for a minute while it cannot be reached.
    static func openRetrying(_ url: String) async throws -> PostgreSQLDatabase {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await PostgreSQLDatabase(url: url)
            } catch let error as MirrorError where error.kind.isTransient && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    private static func perform(_ line: String, on mirror: Mirror<Note>) async throws -> String {
        let words = line.split(separator: " ", maxSplits: 3).map(String.init)
        switch (words.first, words.count) {
        case ("append", 2):
            mirror.dataModel.append(Note(id: words[1]))
        case ("set", 4):
            guard let index = mirror.dataModel.firstIndex(where: { $0.id == words[1] }) else {
                return "error no note \(words[1])"
            }
            switch words[2] {
            case "title": mirror.dataModel[index].title = words[3]
            case "note": mirror.dataModel[index].note = words[3]
            case "count": mirror.dataModel[index].count = Int(words[3]) ?? 0
            default: return "error no field \(words[2])"
            }
        case ("remove", 2):
            guard let index = mirror.dataModel.firstIndex(where: { $0.id == words[1] }) else {
                return "error no note \(words[1])"
            }
            mirror.dataModel.remove(at: index)
        case ("committed", 1):
            try await mirror.waitUntilCommitted(timeout: timeout)
        case ("failing", 1):
            let pending = try await mirror.waitUntilPendingChanges(timeout: timeout, "a failed attempt") {
                $0.contains { $0.failedAttempts > 0 }
            }
            let error = pending.lazy.compactMap(\.lastError).first
            return "ok \(error.map { "\($0.kind)" } ?? "failed")"
        case ("await", _) where words.count >= 2:
            let expected = try JSONDecoder().decode(
                [Note].self, from: Data(line.dropFirst("await ".count).utf8))
            try await mirror.waitUntil(timeout: timeout, "the notes \(expected)") { notes in
                notes.sorted { $0.id < $1.id } == expected
            }
        case ("state", 1):
            return "ok " + state(of: mirror)
        case ("flush", 1):
            try await mirror.flush()
        case ("share", 4):
            guard let access = ShareAccess(rawValue: words[3]) else { return "error no access \(words[3])" }
            try await mirror.share(words[1], with: [try MirrorUser(name: words[2])], access: access)
        case ("revoke", 3):
            try await mirror.revokeShare(of: words[1], from: [try MirrorUser(name: words[2])])
        default:
            return "error unknown command \(line)"
        }
        return "ok"
    }

    private static func state(of mirror: Mirror<Note>) -> String {
        let notes = Array(mirror.dataModel).sorted { $0.id < $1.id }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? String(decoding: encoder.encode(notes), as: UTF8.self)) ?? "[]"
    }

    static func answer(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
