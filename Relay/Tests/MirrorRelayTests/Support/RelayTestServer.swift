import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JWTKit
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import MagicMirrorRelay
import MirrorTestSupport
import PostgresNIO
import Testing

/// The throwaway server `Adapters/PostgreSQL/Scripts/with-postgres.sh` started (see
/// `Scripts/test-all.sh`), and relays started on fresh databases of it.
enum RelayTestServer {
    /// The superuser URL of the server, from `MAGICMIRROR_POSTGRES_URL`.
    static let adminURL = ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_URL"]
    static var isAvailable: Bool { adminURL != nil }
    static let skipMessage: Comment =
        "no PostgreSQL server: run under Adapters/PostgreSQL/Scripts/with-postgres.sh (as Scripts/test-all.sh does)"

    /// The relay role every test relay connects as (roles belong to the whole cluster).
    static let relayRole = "mirror_relay_tests"
    /// The superuser the server's URL names.
    static let adminRole = URLComponents(string: adminURL ?? "")?.user ?? "postgres"
    static let secret = "a secret of the tests, long enough for HS256"
    static let audience = "magicmirror-tests"
    static let logger = Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The URL of database `name` of `server` (an administrator's URL; the shared server
    /// unless given), as `role`.
    static func url(database name: String, role: String? = nil, server: String? = nil) -> String {
        var components = URLComponents(string: server ?? adminURL ?? "postgres://localhost/postgres")!
        components.path = "/" + name
        if let role { components.user = role }
        components.queryItems = [URLQueryItem(name: "sslmode", value: "disable")]
        return components.string!
    }

    /// Runs `statement` as the superuser on database `name` (of `server`, the shared server
    /// unless given) and returns the first column of each row, as text.
    static func admin(_ statement: String, database name: String = "postgres", server: String? = nil) async throws -> [String] {
        let configuration = try PostgresClient.Configuration(
            magicMirrorURL: url(database: name, server: server), environment: [:])
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let run = Task { await client.run() }
        defer { run.cancel() }
        let rows = try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        var values: [String] = []
        for try await row in rows {
            values.append((try? row.decode(String.self)) ?? "")
        }
        return values
    }

    /// A name no other test uses, for databases and users (roles belong to the cluster).
    static func uniqueName(_ prefix: String) -> String {
        prefix + "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
    }

    /// The payload of a test token.
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A token for `subject`, signed with HS256 and `secret`.
    static func token(
        _ subject: String, expiresIn seconds: TimeInterval = 3600, audience: String = audience, secret: String = secret
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(
            Claims(sub: .init(value: subject), exp: .init(value: Date().addingTimeInterval(seconds)), aud: .init(value: [audience])))
    }
}

/// A `mirror-relay` process on a fresh database, set up with `mirror-relay setup`.
final class RunningRelay: Sendable {
    let process: Subprocess
    let url: URL
    let database: String
    /// The administrator's URL of the server the relay's database is on, or `nil` for the
    /// shared server of `with-postgres.sh`.
    let server: String?

    private init(process: Subprocess, url: URL, database: String, server: String?) {
        (self.process, self.url, self.database, self.server) = (process, url, database, server)
    }

    /// The relay's port.
    var port: Int { url.port ?? 0 }

    /// Makes a database, sets it up, and starts a relay on it; or starts another relay on
    /// the database of `sharing`.
    ///
    /// - Parameters:
    ///   - port: The port to listen on (0: any free port), for a relay started again where
    ///     one was killed.
    ///   - server: The administrator's URL of another server than the shared one (a
    ///     cluster the test kills).
    ///   - inNamespace: A network namespace to run the relay in (``HostNetwork``), and its
    ///     address there to listen on; it reaches the shared server by its Unix socket.
    static func start(
        extraArguments: [String] = [], sharing: RunningRelay? = nil, port: Int = 0, server: String? = nil,
        inNamespace: (name: String, address: String)? = nil
    ) async throws -> RunningRelay {
        let database = sharing?.database ?? RelayTestServer.uniqueName("relay")
        let server = sharing?.server ?? server
        let executable = BuiltProducts.executable("mirror-relay")
        if sharing == nil {
            _ = try await RelayTestServer.admin("CREATE DATABASE \(database)", server: server)
            // One setup at a time: each alters the cluster's one relay role, and PostgreSQL
            // refuses two concurrent updates of a role ("tuple concurrently updated").
            let setup = try await SetupGate.shared.run {
                try await Subprocess.run(
                    executable,
                    ["setup", "--admin-url", RelayTestServer.url(database: database, server: server),
                     "--relay-role", RelayTestServer.relayRole])
            }
            guard setup.termination == .exited(0) else {
                throw SubprocessError("mirror-relay setup failed: \(setup.standardError)")
            }
        }
        var databaseURL = RelayTestServer.url(database: database, role: RelayTestServer.relayRole, server: server)
        var command = (executable, [String]())
        if let (namespace, _) = inNamespace {
            // In another network namespace the server's loopback address is not reachable:
            // its Unix socket (a file) is.
            guard let sockets = ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_SOCKETS"], server == nil,
                  let ip = HostNetwork.ip, var components = URLComponents(string: databaseURL)
            else { throw SubprocessError("a relay in a namespace needs with-postgres.sh's socket and ip") }
            components.host = "localhost"
            components.queryItems = [URLQueryItem(name: "host", value: sockets)]
            databaseURL = components.string!
            command = (ip, ["netns", "exec", namespace, executable.path])
        }
        let host = inNamespace?.address ?? "127.0.0.1"
        let process = try Subprocess(
            command.0,
            command.1 + [
                "--database-url", databaseURL,
                "--listen", "\(host):\(port)", "--audience", RelayTestServer.audience, "--connections", "3",
            ] + extraArguments,
            environment: ["MIRROR_RELAY_HS256_SECRET": RelayTestServer.secret, "MIRROR_RELAY_LOG_LEVEL": "warning"])
        let line = try await process.nextLine(timeout: .seconds(60))
        guard let listening = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.kill()
            throw SubprocessError("mirror-relay said \(line)")
        }
        return RunningRelay(
            process: process, url: URL(string: "http://\(host):\(listening)")!, database: database, server: server)
    }

    /// A client database for `subject`, with a fresh token each time one is asked for.
    func client(_ subject: String) -> RelayDatabase {
        Self.client(subject, at: url)
    }

    /// A client database for `subject` of the relay (or balancer) at `url`.
    static func client(_ subject: String, at url: URL) -> RelayDatabase {
        // A subject the tests choose is a valid user name; an invalid one is the test's bug.
        RelayDatabase(url: url, user: try! MirrorUser(name: subject)) { try await RelayTestServer.token(subject) }
    }

    /// Runs `statement` as the superuser on the relay's database; the first column of each
    /// row, as text.
    func admin(_ statement: String) async throws -> [String] {
        try await RelayTestServer.admin(statement, database: database, server: server)
    }

    /// Sends a raw request; returns the status and the body.
    func send(
        _ path: String, method: String = "POST", body: Data? = nil, token: String?, headers: [String: String] = [:]
    ) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: url.absoluteString + path)!)
        request.httpMethod = method
        request.httpBody = body
        if let token { request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    /// Stops the relay (SIGTERM) and, unless `keepingDatabase`, drops its database.
    func stop(keepingDatabase: Bool = false) async {
        process.kill(SIGTERM)
        _ = try? await process.wait(timeout: .seconds(30))
        if process.termination == nil { process.kill() }
        if !keepingDatabase {
            _ = try? await RelayTestServer.admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)", server: server)
        }
    }

    /// Runs `body` with a relay that is stopped afterwards, whatever happens.
    static func with<Result: Sendable>(
        extraArguments: [String] = [], _ body: (RunningRelay) async throws -> Result
    ) async throws -> Result {
        let relay = try await start(extraArguments: extraArguments)
        do {
            let result = try await body(relay)
            await relay.stop()
            return result
        } catch {
            await relay.stop()
            throw error
        }
    }
}

/// Runs one `mirror-relay setup` of this test process at a time.
actor SetupGate {
    static let shared = SetupGate()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func run<Result: Sendable>(_ body: @Sendable () async throws -> Result) async throws -> Result {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
