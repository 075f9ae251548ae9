import Foundation
import MagicMirror
import PostgresNIO
import Synchronization

/// A ``RecordDatabase`` on a PostgreSQL server that exists at once and connects in the
/// background: the remote of a `ReplicatedDatabase` for an app that may start offline.
///
/// ``PostgreSQLDatabase/init(url:environment:maximumConnections:)`` needs the server: it
/// reads the schema before it returns. This one returns at once; it opens a
/// ``PostgreSQLDatabase`` in the background, trying again with backoff (up to
/// ``maximumRetryDelay``) until the server answers. Until then every operation fails at once
/// with a transient ``MirrorError`` (kind ``MirrorError/Kind/unavailable``) that says why
/// the server could not be reached, so a `ReplicatedDatabase` over it opens from its replica,
/// says `offline`, and keeps its changes until the server is there:
///
/// ```swift
/// let server = try DeferredPostgreSQLDatabase(url: "postgres://alice@db.example.com/todos")
/// let replicated = ReplicatedDatabase(
///     local: try JSONFileDatabase(directory: replicaDirectory), remote: server)
/// let todos = try await Mirror<Todo>(database: replicated) // at once, from the replica
/// ```
///
/// Subscriptions made before the connection are made on the server once it is there, and
/// each subscriber then gets one notification (with no record ids) so that it pulls.
///
/// Its ``identifier`` names the endpoint (`postgresql://ROLE@HOST:PORT/DATABASE`), since the
/// server's own identifier cannot be known before connecting; a replica made over a
/// ``PostgreSQLDatabase`` is rebuilt from the server once when put over this one.
///
/// > Important: Call ``close()`` when you are done.
public final class DeferredPostgreSQLDatabase: RecordDatabase {
    /// The endpoint this database connects to: `postgresql://ROLE@HOST:PORT/DATABASE`.
    public let identifier: String
    /// The writer id of every commit made through this database.
    public let writerID: String
    /// The user of the role the URL names (see ``PostgreSQLDatabase/connectedUser``), known
    /// before the server answers.
    public let connectedUser: MirrorUser?
    /// The longest wait between two attempts to open the database.
    public static let maximumRetryDelay = Duration.seconds(5)

    private struct State {
        var database: PostgreSQLDatabase?
        var lastError: MirrorError?
        var subscriptions: [Int: Subscription] = [:]
        var nextID = 0
        var closed = false
    }

    private struct Subscription {
        let zone: ZoneID
        let handler: @Sendable (RemoteNotification) -> Void
        var attached: MirrorCancellable?
    }

    private let state = Mutex(State())
    private let opening = Mutex<Task<Void, Never>?>(nil)

    /// Starts opening the database at `url` in the background.
    ///
    /// - Parameters:
    ///   - url: The connection URL (see ``PostgreSQLDatabase/init(url:environment:maximumConnections:)``).
    ///   - environment: Where `PGPASSWORD` and `PGUSER` are read.
    ///   - maximumConnections: How many pooled connections the process opens to this server
    ///     at most.
    /// - Throws: ``MirrorError/Kind/unsupportedFormat`` for a malformed URL; nothing else:
    ///   the server is reached later.
    public init(
        url: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        maximumConnections: Int = PostgreSQLDatabase.defaultMaximumConnections
    ) throws {
        let configuration = try PostgreSQLConnectionURL.configuration(from: url, environment: environment)
        let address = configuration.unixSocketPath ?? "\(configuration.host ?? ""):\(configuration.port ?? 5432)"
        identifier = "postgresql://\(configuration.username)@\(address)/\(configuration.database ?? configuration.username)"
        connectedUser = try? MirrorUser(name: configuration.username)
        let writerID = "pg-" + UUID().uuidString.lowercased()
        self.writerID = writerID
        state.withLock { $0.lastError = MirrorError(.unavailable, "connecting to \(address) in the background") }
        let task = Task { [weak self] in
            var backoff = Listening.initialBackoff
            while !Task.isCancelled {
                do {
                    let database = try await PostgreSQLDatabase(
                        configuration: configuration, maximumConnections: maximumConnections, writerID: writerID)
                    guard let self else { return await database.close() }
                    await self.opened(database)
                    return
                } catch {
                    if Task.isCancelled { return }
                    self?.state.withLock { $0.lastError = PostgreSQLErrors.mirrorError(error, "connecting to the server") }
                    try? await Task.sleep(for: backoff)
                    backoff = min(backoff * 2, Self.maximumRetryDelay)
                }
            }
        }
        opening.withLock { $0 = task }
    }

    deinit {
        opening.withLock { $0 }?.cancel()
    }

    /// The database, once the server answered.
    public var database: PostgreSQLDatabase? { state.withLock { $0.database } }

    /// Ends the connections and subscriptions; calls after it fail.
    public func close() async {
        opening.withLock { $0 }?.cancel()
        let database = state.withLock { state in
            state.closed = true
            state.subscriptions = [:]
            return state.database
        }
        await database?.close()
    }

    private func opened(_ database: PostgreSQLDatabase) async {
        let (closed, waiting) = state.withLock { state in
            if !state.closed { state.database = database }
            return (state.closed, state.subscriptions)
        }
        if closed { return await database.close() }
        for (id, subscription) in waiting {
            guard let attached = try? database.subscribe(to: subscription.zone, handler: subscription.handler) else {
                continue
            }
            let kept = state.withLock { state in
                guard state.subscriptions[id] != nil else { return false }
                state.subscriptions[id]?.attached = attached
                return true
            }
            guard kept else {
                attached.cancel()
                continue
            }
            // What the server holds may be new to the subscriber: let it pull.
            let token = (try? await database.currentToken(in: subscription.zone)) ?? .initial
            subscription.handler(RemoteNotification(
                databaseIdentifier: database.identifier, zone: subscription.zone, recordIDs: [], reason: .updated,
                token: token))
        }
    }

    /// The opened database, or the reason there is none yet.
    private func connected() throws(MirrorError) -> PostgreSQLDatabase {
        let (database, error, closed) = state.withLock { ($0.database, $0.lastError, $0.closed) }
        if closed { throw MirrorError(.unavailable, "the database is closed") }
        if let database { return database }
        throw MirrorError(
            .unavailable,
            "not connected to the server yet (\(error?.message ?? "connecting")); trying again in the background")
    }

    // MARK: - RecordDatabase

    /// Commits through the opened database; fails at once while the server is not reached.
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try await connected().commit(operations, to: zone)
    }

    /// Every live record of a zone; fails at once while the server is not reached.
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try await connected().fetchAll(in: zone)
    }

    /// The live records with the given ids; fails at once while the server is not reached.
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await connected().fetch(recordIDs, in: zone)
    }

    /// The changes of a zone since `token`; fails at once while the server is not reached.
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await connected().changes(in: zone, since: token)
    }

    /// The zone's current token; fails at once while the server is not reached.
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try await connected().currentToken(in: zone)
    }

    /// Calls `handler` for every commit to `zone`, from the moment the server is reached
    /// (then once with no record ids, so that the subscriber pulls).
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        let (id, database) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscriptions[id] = Subscription(zone: zone, handler: handler)
            return (id, state.database)
        }
        if let database {
            let attached = try database.subscribe(to: zone, handler: handler)
            state.withLock { $0.subscriptions[id]?.attached = attached }
        }
        return MirrorCancellable { [weak self] in
            let attached = self?.state.withLock { $0.subscriptions.removeValue(forKey: id)?.attached }
            attached?.cancel()
        }
    }
}
