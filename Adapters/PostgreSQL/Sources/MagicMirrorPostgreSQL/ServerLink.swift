import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// The connections of one process to one server, for one role and one database, shared by
/// every ``PostgreSQLDatabase`` opened with the same endpoint:
/// - a bounded pool (`client`) for commits, reads and everything else;
/// - one listening connection (``listener``), outside the pool, shared by every database's
///   subscriptions (see ``SharedListener``);
/// - dedicated connections made by ``connect(applicationName:)`` (the listener's, and the
///   link's one asset presence's, ``assetPresence()``), with TCP keepalive on the socket.
///
/// A link is counted: ``acquire(_:maximumConnections:logger:)`` finds or makes it,
/// ``release()`` ends it with its last user.
///
/// A lease from the pool that waits (``diagnosisDelay``) while nothing else was leased waits
/// for the listening connection instead when it is up; otherwise it makes the link try a
/// connection of its own (``diagnose()``): when the server refuses it (too many connections, an unknown
/// role, nothing listening on the port), the waiting operation fails at once with that
/// cause instead of waiting for its deadline, since the pool only retries in silence; when
/// the refusal is for too many connections and the listening connection is up, the
/// operation waits for that one instead.
///
/// Work goes first to the listening connection when it is up and free
/// (``SharedListener/withListeningConnection(wait:_:)``), to the pool otherwise; pooled
/// connections close after ``idleTimeout`` unused. A process that is not busy then holds
/// its listening connection only, and under load no more than its pool and that one.
final class ServerLink: Sendable {
    /// What makes two configurations the same link; the password only ever stays in memory.
    struct Key: Hashable, Sendable {
        let address: String
        let username: String
        let password: String?
        let database: String?
        let tls: String
    }

    /// How many pooled connections a link opens at most unless told otherwise.
    static let defaultMaximumConnections = 2
    /// How long a pooled connection stays open unused (postgres-nio's default is 60 s).
    static let idleTimeout = Duration.seconds(10)
    /// How long a lease may wait before the link checks that the server accepts connections.
    static let diagnosisDelay = Duration.milliseconds(500)
    /// TCP keepalive of dedicated connections: idle time before the first probe, interval
    /// between probes, and how many unanswered probes end the connection; unacknowledged
    /// data ends it after ``userTimeoutMilliseconds``.
    static let keepAlive = (idle: 4, interval: 2, count: 2)
    static let userTimeoutMilliseconds = 8_000

    let key: Key
    let client: PostgresClient
    let logger: Logger
    /// The listening connection of every database on this link.
    let listener: SharedListener
    private let configuration: PostgresClient.Configuration
    private let tlsMode: TLSMode
    private let runTask: Task<Void, Never>
    private let context = Mutex<NIOSSLContext?>(nil)
    private let probe = Mutex<(task: Task<MirrorError?, Never>, started: ContinuousClock.Instant)?>(nil)
    private let nextID = Atomic<Int>(1_000_000)
    /// When a lease last began: a pool that serves leases is busy, not refused.
    private let lastLease = Mutex<ContinuousClock.Instant?>(nil)
    /// The asset presence of every database on the link, made by the first store.
    private let presence = Mutex<AssetPresence?>(nil)

    private static let links = Mutex<[Key: (link: ServerLink, users: Int)]>([:])

    private init(key: Key, configuration: PostgresClient.Configuration, tlsMode: TLSMode, logger: Logger) {
        self.key = key
        self.configuration = configuration
        self.tlsMode = tlsMode
        self.logger = logger
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runTask = Task { await client.run() }
        listener = SharedListener()
    }

    /// The link for `configuration`, made with a pool of `maximumConnections` when it is the
    /// first; counted until ``release()``.
    static func acquire(
        _ configuration: PostgresClient.Configuration, maximumConnections: Int, logger: Logger
    ) -> ServerLink {
        let tlsMode = TLSMode(configuration.tls)
        let address = configuration.unixSocketPath.map { "unix:" + $0 }
            ?? "\(configuration.host ?? ""):\(configuration.port ?? 5432)"
        let key = Key(
            address: address, username: configuration.username, password: configuration.password,
            database: configuration.database, tls: tlsMode.name)
        return links.withLock { links in
            if let found = links[key] {
                links[key] = (found.link, found.users + 1)
                return found.link
            }
            var configuration = configuration
            configuration.options.maximumConnections = max(1, maximumConnections)
            configuration.options.connectionIdleTimeout = Self.idleTimeout
            let link = ServerLink(key: key, configuration: configuration, tlsMode: tlsMode, logger: logger)
            links[key] = (link, 1)
            return link
        }
    }

    /// Ends this use of the link; the last ends its connections. Returns the task to await
    /// for the pool's end, when it was the last.
    @discardableResult
    func release() -> Task<Void, Never>? {
        let last = Self.links.withLock { links -> Bool in
            guard let found = links[key], found.link === self else { return false }
            if found.users > 1 {
                links[key] = (self, found.users - 1)
                return false
            }
            links[key] = nil
            return true
        }
        guard last else { return nil }
        listener.stop()
        presence.withLock { presence in
            presence?.stop()
            presence = nil
        }
        probe.withLock { $0?.task.cancel() }
        runTask.cancel()
        return runTask
    }

    /// The asset presence of every database on this link (one lock, one connection, for
    /// the process), made on first use and stopped with the link.
    func assetPresence() -> AssetPresence {
        presence.withLock { presence in
            if let presence { return presence }
            let made = AssetPresence(link: self, logger: logger)
            presence = made
            return made
        }
    }

    /// Where the link connects, for messages.
    var serverName: String {
        configuration.unixSocketPath.map { "the socket \($0)" }
            ?? "\(configuration.host ?? "?"):\(configuration.port ?? 5432)"
    }

    // MARK: - The pool

    /// Runs `body` on the listening connection when it is free, else on a pooled connection;
    /// fails at once when the server refuses new connections while the lease waits, unless
    /// it refuses for too many and the listening connection is up.
    func withConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        // A relay's request: a transaction of its own, as its user (see PostgreSQLActingUser).
        let body = PostgreSQLActingUser.current.map { $0.wrap(body, logger: logger) } ?? body
        if let result = try await listener.withListeningConnection(wait: false, body) { return result }
        let lease = Lease(checkAt: ContinuousClock.now + Self.diagnosisDelay)
        let client = client
        let work = Task {
            try await client.withConnection { [self] connection in
                try lease.begin()
                lastLease.withLock { $0 = .now }
                return try await body(connection)
            }
        }
        // A lease that still waits after the diagnosis delay (a check of the process's
        // ticker, no timer of its own) makes the link try a connection of its own, again
        // every four delays while it waits.
        Ticker.shared.add { [self] now in
            guard lease.isWaiting else { return true }
            guard lease.isDue(now) else { return false }
            lease.checkAgain(after: .seconds(3600)) // not while this check runs
            Task {
                let served = lastLease.withLock { $0.map { ContinuousClock.now - $0 < Self.diagnosisDelay } ?? false }
                // The server answers on the listening connection: wait for that one rather
                // than probe with a connection more.
                if !served, listener.isListening {
                    if lease.redirect() { work.cancel() }
                    return
                }
                if !served, let refusal = await diagnose() {
                    if lease.refuse(refusal) { work.cancel() }
                    return
                }
                lease.checkAgain(after: Self.diagnosisDelay * 4)
            }
            return false
        }
        defer { lease.end() }
        do {
            return try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
        } catch {
            if lease.isRedirected {
                if let result = try await listener.withListeningConnection(wait: true, body) { return result }
                throw MirrorError(
                    .unavailable, "the listening connection to \(serverName) closed while work waited for it; retrying")
            }
            guard let refusal = lease.refusal else { throw error }
            if PostgreSQLErrors.isTooManyConnections(refusal),
               let result = try await listener.withListeningConnection(wait: true, body) {
                return result
            }
            throw refusal
        }
    }

    /// Runs `body` in a transaction on a pooled connection (see ``withConnection(_:)``).
    func withTransaction<Result: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        // A relay's request is already a transaction (see withConnection).
        if PostgreSQLActingUser.current != nil { return try await withConnection(body) }
        return try await withConnection { connection in
            try await connection.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }

    /// Why the server refuses a new connection now, or `nil` when it accepts one. One check
    /// at a time, its answer shared for a moment by every lease that waits.
    func diagnose() async -> MirrorError? {
        let task = probe.withLock { probe -> Task<MirrorError?, Never> in
            if let probe, ContinuousClock.now - probe.started < Self.diagnosisDelay { return probe.task }
            let task = Task { [self] () -> MirrorError? in
                do {
                    let connection = try await connect(applicationName: "magicmirror-check")
                    try? await connection.close()
                    return nil
                } catch {
                    return PostgreSQLErrors.connectionRefusal(error, to: self)
                }
            }
            probe = (task, ContinuousClock.now)
            return task
        }
        return await task.value
    }

    // MARK: - Dedicated connections

    /// A new connection outside the pool, named `applicationName` in `pg_stat_activity`,
    /// with TCP keepalive on its socket.
    ///
    /// - Throws: What connecting throws (see ``PostgreSQLErrors/connectionRefusal(_:to:)``).
    func connect(applicationName: String) async throws -> PostgresConnection {
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(TimeAmount(configuration.options.connectTimeout))
        let channel: any Channel
        if let path = configuration.unixSocketPath {
            channel = try await bootstrap.connect(unixDomainSocketPath: path).get()
        } else {
            bootstrap = bootstrap.channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
            #if os(Linux)
            let tcp = NIOBSDSocket.OptionLevel.tcp
            bootstrap = bootstrap
                .channelOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPIDLE)), value: Self.keepAlive.idle)
                .channelOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPINTVL)), value: Self.keepAlive.interval)
                .channelOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_KEEPCNT)), value: Self.keepAlive.count)
                .channelOption(ChannelOptions.Types.SocketOption(level: tcp, name: .init(rawValue: TCP_USER_TIMEOUT)), value: Self.userTimeoutMilliseconds)
            #endif
            channel = try await bootstrap.connect(host: configuration.host ?? "localhost", port: configuration.port ?? 5432).get()
        }
        do {
            var connectionConfiguration = PostgresConnection.Configuration(
                establishedChannel: channel, tls: try connectionTLS(), username: configuration.username,
                password: configuration.password, database: configuration.database)
            connectionConfiguration.options.tlsServerName = configuration.options.tlsServerName
                ?? (configuration.unixSocketPath == nil ? configuration.host : nil)
            connectionConfiguration.options.requireBackendKeyData = configuration.options.requireBackendKeyData
            connectionConfiguration.options.additionalStartupParameters =
                configuration.options.additionalStartupParameters.filter { $0.0 != "application_name" }
                + [("application_name", applicationName)]
            // A server that accepts the socket and then says nothing (a hung postmaster)
            // would hold the start-up for ever.
            let (id, logger) = (nextID.add(1, ordering: .relaxed).newValue, logger)
            let handshake = connectionConfiguration
            return try await withDeadline(configuration.options.connectTimeout, "connecting to \(serverName)") {
                try await PostgresConnection.connect(
                    on: channel.eventLoop, configuration: handshake, id: id, logger: logger)
            }
        } catch {
            try? await channel.close()
            throw error
        }
    }

    private func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
        guard let tlsConfiguration = tlsMode.configuration, configuration.unixSocketPath == nil else { return .disable }
        let sslContext = try context.withLock { cached in
            if let cached { return cached }
            let made = try NIOSSLContext(configuration: tlsConfiguration)
            cached = made
            return made
        }
        return tlsMode.required ? .require(sslContext) : .prefer(sslContext)
    }
}

extension ServerLink {
    /// The TLS of a client configuration, which postgres-nio does not expose: read by
    /// reflection, and `require` with the system's roots when it cannot be read (a connection
    /// then fails rather than speaking in clear).
    struct TLSMode: Sendable {
        let name: String
        let configuration: TLSConfiguration?
        var required: Bool { name == "require" }

        init(_ tls: PostgresClient.Configuration.TLS) {
            guard let base = Swift.Mirror(reflecting: tls).children.first(where: { $0.label == "base" })?.value else {
                (name, configuration) = ("require", .makeClientConfiguration())
                return
            }
            let payload = Swift.Mirror(reflecting: base).children.first
            if let label = payload?.label, let found = payload?.value as? TLSConfiguration {
                (name, configuration) = (label, found)
            } else if String(describing: base) == "disable" {
                (name, configuration) = ("disable", nil)
            } else {
                (name, configuration) = ("require", .makeClientConfiguration())
            }
        }
    }

    /// A lease from the pool: waiting, then begun, refused by ``ServerLink/diagnose()``, or
    /// redirected to the listening connection.
    final class Lease: Sendable {
        private enum Phase { case waiting, begun, refused(MirrorError), redirected, ended }
        private let phase = Mutex(Phase.waiting)
        /// When the link checks the server next, while the lease waits.
        private let checkAt: Mutex<ContinuousClock.Instant>

        init(checkAt: ContinuousClock.Instant) { self.checkAt = Mutex(checkAt) }

        var isWaiting: Bool { phase.withLock { if case .waiting = $0 { true } else { false } } }
        var isRedirected: Bool { phase.withLock { if case .redirected = $0 { true } else { false } } }
        func isDue(_ now: ContinuousClock.Instant) -> Bool { checkAt.withLock { now >= $0 } }
        func checkAgain(after delay: Duration) { checkAt.withLock { $0 = .now + delay } }

        /// The operation is over (the lease, if it waits still, will not be used).
        func end() { phase.withLock { if case .waiting = $0 { $0 = .ended } } }
        var refusal: MirrorError? { phase.withLock { if case .refused(let error) = $0 { error } else { nil } } }

        /// Marks the connection leased; throws if the lease was refused or redirected first.
        func begin() throws {
            try phase.withLock { phase in
                switch phase {
                case .refused(let error): throw error
                case .redirected, .ended: throw CancellationError()
                case .waiting, .begun: phase = .begun
                }
            }
        }

        /// Redirects the lease to the listening connection if it still waits; returns whether
        /// it did.
        func redirect() -> Bool {
            phase.withLock { phase in
                guard case .waiting = phase else { return false }
                phase = .redirected
                return true
            }
        }

        /// Refuses the lease if it still waits; returns whether it did.
        func refuse(_ error: MirrorError) -> Bool {
            phase.withLock { phase in
                guard case .waiting = phase else { return false }
                phase = .refused(error)
                return true
            }
        }
    }
}
