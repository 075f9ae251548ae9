import Foundation
import Logging
import PostgresNIO
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The server `MAGICMIRROR_POSTGRES_URL` names (a superuser's URL), on which the bench makes
/// a fresh database and drops it afterwards.
enum BenchServer {
    static let adminURL = ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_URL"]
    static let relayRole = "mirror_relay_bench"
    static let secret = "relay-bench's own secret, long enough for HS256"
    static let audience = "relay-bench"
    static let logger = Logger(label: "relay-bench", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The URL of database `name` of the server, as `role` (the superuser unless given).
    static func url(database name: String, role: String? = nil) throws -> String {
        guard let adminURL, var components = URLComponents(string: adminURL) else {
            throw BenchFailure(
                "no server: set MAGICMIRROR_POSTGRES_URL, or run under Adapters/PostgreSQL/Scripts/with-postgres.sh")
        }
        components.path = "/" + name
        if let role { components.user = role }
        components.queryItems = [URLQueryItem(name: "sslmode", value: "disable")]
        return components.string!
    }

    /// A postgres-nio configuration for database `name` of the server, as `role` (the
    /// superuser unless given).
    static func configuration(database name: String, role: String? = nil) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: try url(database: name, role: role)), let host = components.host else {
            throw BenchFailure("MAGICMIRROR_POSTGRES_URL is not a URL with a host")
        }
        return PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: name, tls: .disable)
    }

    /// Runs `statement` as the superuser on `database` (`postgres` unless given).
    static func admin(_ statement: String, database: String = "postgres") async throws {
        let client = PostgresClient(configuration: try configuration(database: database), backgroundLogger: logger)
        let run = Task { await client.run() }
        defer { run.cancel() }
        for try await _ in try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger) {}
    }

    /// How many transactions the server has counted in `database` (committed or rolled
    /// back; the statistics lag the transactions by up to a second), and the processes of
    /// the server's sessions on it (the server runs on this machine).
    static func activity(in database: String) async -> (transactions: Int?, backends: [Int]) {
        guard let configuration = try? configuration(database: "postgres") else { return (nil, []) }
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let run = Task { await client.run() }
        defer { run.cancel() }
        var transactions: Int?
        var backends: [Int] = []
        do {
            let counts = try await client.query(
                "SELECT xact_commit + xact_rollback FROM pg_catalog.pg_stat_database WHERE datname = \(database)",
                logger: logger)
            for try await count in counts.decode(Int.self) { transactions = count }
            let sessions = try await client.query(
                "SELECT pid FROM pg_catalog.pg_stat_activity WHERE datname = \(database)", logger: logger)
            for try await pid in sessions.decode(Int32.self) { backends.append(Int(pid)) }
        } catch {}
        return (transactions, backends)
    }
}

/// A failure of the bench itself, with what to do about it.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A `mirror-relay` process: the release (or debug) build beside this executable.
final class BenchRelay: Sendable {
    /// `Process` is not `Sendable` on every platform; it is only read (`isRunning`,
    /// `processIdentifier`) and signalled after `run()`, which are safe from any thread.
    fileprivate struct Child: @unchecked Sendable { let process: Process }
    private let child: Child
    let port: Int
    var pid: pid_t { child.process.processIdentifier }

    /// The `mirror-relay` next to this executable.
    static var executable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("mirror-relay")
    }

    private init(child: Child, port: Int) { (self.child, self.port) = (child, port) }

    /// Runs `mirror-relay setup` on `database`, as the superuser.
    static func setup(database: String) throws {
        let process = Process()
        process.executableURL = executable
        process.arguments = ["setup", "--admin-url", try BenchServer.url(database: database), "--relay-role", BenchServer.relayRole]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchFailure("mirror-relay setup exited with status \(process.terminationStatus)")
        }
    }

    /// Starts the relay on `database` (set up before) on a free loopback port and waits for
    /// its "listening" line. Its later output goes to this process's standard error.
    static func start(database: String) throws -> BenchRelay {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw BenchFailure("no mirror-relay beside relay-bench at \(executable.path): build the package (swift build --package-path Relay)")
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = [
            "--database-url", try BenchServer.url(database: database, role: BenchServer.relayRole),
            "--listen", "127.0.0.1:0", "--audience", BenchServer.audience,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["MIRROR_RELAY_HS256_SECRET"] = BenchServer.secret
        environment["MIRROR_RELAY_LOG_LEVEL"] = "warning"
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        BenchCleanup.shared.relay = Child(process: process)
        let output = pipe.fileHandleForReading
        var buffer = Data()
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = output.availableData
            if chunk.isEmpty {
                throw BenchFailure("mirror-relay exited before listening: \(String(decoding: buffer, as: UTF8.self))")
            }
            buffer.append(chunk)
        }
        let line = String(decoding: buffer.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw BenchFailure("mirror-relay said \(line)")
        }
        // Whatever it says later (its warnings) must not fill the pipe and stop it.
        Thread.detachNewThread {
            while true {
                let chunk = output.availableData
                if chunk.isEmpty { return }
                FileHandle.standardError.write(chunk)
            }
        }
        return BenchRelay(child: Child(process: process), port: port)
    }

    /// The relay's resident memory (VmRSS), in KiB.
    var residentKiB: Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").compactMap { Double($0) }.first
        }
        return nil
    }

    /// How many descriptors the relay has open.
    var descriptors: Int? { try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count }

    /// Makes a fresh database (named after a new run id, which also prefixes the users' names),
    /// sets it up, starts a relay on it and runs `body` with both; then, also when `body`
    /// throws, stops the relay and drops the database and the roles given to
    /// ``BenchCleanup/addRoles(_:)`` meanwhile.
    static func withFreshRelay<Result>(_ body: (BenchRelay, _ run: String) async throws -> Result) async throws -> Result {
        let run = "rb" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(8)
        do {
            try await BenchServer.admin("CREATE DATABASE \(run)")
            BenchCleanup.shared.database = run
            try setup(database: run)
            let result = try await body(try start(database: run), run)
            await BenchCleanup.shared.run()
            return result
        } catch {
            await BenchCleanup.shared.run()
            throw error
        }
    }

    /// The processor time the relay has used so far, in seconds.
    var cpuSeconds: Double? { ProcessorTime.process("\(pid)") }

    /// Stops a relay: SIGTERM, then SIGKILL after 10 s.
    fileprivate static func stop(_ child: Child) {
        guard child.process.isRunning else { return }
        kill(child.process.processIdentifier, SIGTERM)
        let deadline = monotonicSeconds() + 10
        while child.process.isRunning && monotonicSeconds() < deadline { usleep(20_000) }
        if child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) }
        child.process.waitUntilExit()
    }
}

/// What the bench must undo whatever happens: the relay process, its database and the roles
/// of its users (roles belong to the whole cluster). Run after each workload's relay, on a
/// failure, or on SIGINT/SIGTERM.
final class BenchCleanup: Sendable {
    static let shared = BenchCleanup()

    private struct State {
        var relay: BenchRelay.Child?
        var database: String?
        var roles: [String] = []
    }
    private let state = Mutex(State())

    fileprivate var relay: BenchRelay.Child? {
        get { state.withLock { $0.relay } }
        set { state.withLock { $0.relay = newValue } }
    }
    var database: String? {
        get { state.withLock { $0.database } }
        set { state.withLock { $0.database = newValue } }
    }
    /// Roles to drop with the database: the users of the relay under way, and any of the
    /// bench's own.
    func addRoles(_ names: [String]) { state.withLock { $0.roles += names } }

    /// The cleanup under way: a second caller (the signal's, or the bench's own when a
    /// signal stopped the relay under it) waits for the first's to end, then returns.
    private let running = Mutex<Task<Void, Never>?>(nil)

    /// Stops the relay, drops the database, then the roles; callers meanwhile wait for the
    /// same cleanup. Once it is done, the next call cleans up what was registered since (the
    /// next workload's relay).
    func run() async {
        let task = running.withLock { running in
            if let running { return running }
            let task = Task {
                await self.cleanUp()
                // Waits for the caller that made this task to store it, then forgets it.
                self.running.withLock { $0 = nil }
            }
            running = task
            return task
        }
        await task.value
    }

    private func cleanUp() async {
        let taken = state.withLock { state in
            defer { state = State() }
            return state
        }
        if let relay = taken.relay { BenchRelay.stop(relay) }
        if let database = taken.database {
            do {
                try await BenchServer.admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
            } catch {
                FileHandle.standardError.write(Data("relay-bench: could not drop database \(database): \(error)\n".utf8))
            }
        }
        for chunk in stride(from: 0, to: taken.roles.count, by: 500) {
            let names = taken.roles[chunk..<min(chunk + 500, taken.roles.count)].map { "\"\($0)\"" }
            do {
                try await BenchServer.admin("DROP ROLE IF EXISTS " + names.joined(separator: ", "))
            } catch {
                FileHandle.standardError.write(Data("relay-bench: could not drop the users' roles: \(error)\n".utf8))
            }
        }
    }

    /// On SIGINT or SIGTERM: cleans up, then exits with status 130. Keep the sources
    /// returned: a source released is cancelled.
    func handleSignals() -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                Task {
                    await BenchCleanup.shared.run()
                    exit(130)
                }
            }
            source.resume()
            return source
        }
    }

    /// Raises this process's descriptor limit to its hard limit (the relay, started after,
    /// inherits it); returns the limit now in force.
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return -1 }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
        _ = getrlimit(resource, &limit)
        return Int(clamping: limit.rlim_cur)
    }
}
