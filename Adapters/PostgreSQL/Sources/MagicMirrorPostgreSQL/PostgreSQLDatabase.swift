import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// A ``RecordDatabase`` on a PostgreSQL server: mirrors on many machines share one zone,
/// and hear each other's commits through `LISTEN`/`NOTIFY`.
///
/// Open it with a connection URL, or with a postgres-nio configuration:
///
/// ```swift
/// // The password, if the server asks for one, comes from PGPASSWORD.
/// let database = try await PostgreSQLDatabase(url: "postgres://alice@db.example.com/todos?sslmode=require")
/// let mirror = try await Mirror<Todo>(database: database)
/// ```
///
/// The first process that opens a database creates the `magicmirror` schema (see the
/// article "Running on PostgreSQL"), so the first role to connect must be allowed to create
/// it; later versions of this package migrate it in place.
///
/// It keeps the contract of every ``RecordDatabase`` (the conformance suite of
/// `MirrorTesting` runs on it unchanged):
/// - a commit is one transaction: versions are checked and every record is written, or
///   none, and the commit's `NOTIFY` is sent in that transaction;
/// - change tokens come from a server-side sequence; a token from before the zone's history
///   was rewritten (``compactHistory(of:)``) or from before the server's data was replaced
///   (a new database has a new base generation) gets the complete zone;
/// - records carry the writer's hybrid-logical-clock timestamp and writer id.
///
/// **Scopes.** Public zones are shared by every role. A private zone belongs to the role
/// whose name is its user: row-level security on the server keeps it invisible and
/// unwritable to every other role. Connect each user as their own role; the role that owns
/// the schema is not restricted (it runs migrations and ``compactHistory(of:)``).
///
/// **Sharing.** It is a ``SharingDatabase``: a role shares records of its private zones
/// with other roles, read-only or read-write, and reads what is shared with it in its
/// shared zones; the server enforces every share (see the article "Running on PostgreSQL").
///
/// **Assets.** It is an ``AssetDatabase``: a mirror on it stores files that records carry
/// (`Mirror.storeAsset(contentsOf:)`), streamed to the server in chunks, committed before
/// the record that refers to them, and collected once nothing refers to them (see the
/// article "Running on PostgreSQL").
///
/// **Notifications** are hints: after a lost connection or a server restart, the database
/// reconnects with backoff, reports the outage once as a transient ``MirrorError`` (kind
/// ``MirrorError/Kind/unavailable``, posted as `.mirrorError`), and then pulls each
/// subscribed zone since its last token, so no change is missed. The listening connection
/// is checked every 2 s (`SELECT 1`, answered within 4 s) and has TCP keepalive, so a
/// connection the server forgot or a backend that hangs is noticed within seconds.
///
/// **Connections** are shared by every database of the process opened for the same server,
/// role and database: one listening connection, and a pool of at most
/// ``defaultMaximumConnections`` (or the `maximumConnections` given) for everything else.
/// A connection the server refuses fails the operation at once, with the cause (see
/// "Connections, pools and limits" in the article "Running on PostgreSQL").
///
/// > Important: Call ``close()`` when you are done; it ends the connections.
public final class PostgreSQLDatabase: RecordDatabase, AccountVerifiable, SharingDatabase {
    /// The version of the `magicmirror` schema this package reads and writes.
    public static let schemaVersion = PostgreSQLSchema.currentVersion

    /// The `search_path` of every session this package opens: built-in objects only (and
    /// the session's own temporary ones, last); every table is named with its schema.
    static let searchPath = "pg_catalog, pg_temp"

    /// The identifier stored in the database (`magicmirror.meta`), the same for every
    /// process.
    public let identifier: String
    /// This instance's writer id.
    public let writerID: String
    /// The role this database connects as.
    public let role: String
    /// The user of ``role``: a private or shared mirror opened without a `user:` is its
    /// (row-level security lets a role reach its own private zone only); `nil` for a role
    /// whose name is no valid user name.
    public var connectedUser: MirrorUser? { try? roleUser() }

    /// The process's connections to this server as this role (shared with every database
    /// opened with the same endpoint).
    let link: ServerLink
    let logger: Logger
    let baseGeneration: Int
    private let released = Mutex(false)
    let listening: Listening
    /// Where ``fileURL(for:in:)`` keeps the assets it downloads.
    let assetCache: AssetCache
    /// How ``fetchAll(in:)`` and ``changes(in:since:)`` read a zone: pages of
    /// ``ZonePages/Paging/standard`` (tests make them small).
    let readPaging = Mutex(ZonePages.Paging.standard)

    /// Opens a database from a connection URL.
    ///
    /// The URL has the form `postgres://ROLE@HOST:PORT/DATABASE?sslmode=MODE`:
    /// - `ROLE` defaults to `PGUSER`, then to the user running the process;
    /// - the password is never part of the URL: it is read from `PGPASSWORD` in
    ///   `environment` when the server asks for one, and never logged;
    /// - `sslmode` is `disable`, `prefer` (the default: TLS when the server offers it) or
    ///   `require` (TLS, with the server's certificate verified);
    /// - `?host=/path/to/dir` connects through the Unix socket in that directory instead
    ///   (`.s.PGSQL.PORT`, as libpq does).
    ///
    /// - Parameters:
    ///   - url: The connection URL (`postgres://` or `postgresql://`).
    ///   - environment: Where `PGPASSWORD` and `PGUSER` are read.
    ///   - maximumConnections: How many pooled connections the process opens to this server
    ///     at most (see ``init(configuration:maximumConnections:)``).
    /// - Throws: ``MirrorError/Kind/unsupportedFormat`` for a malformed URL or one that
    ///   carries a password; ``MirrorError/Kind/unavailable`` when the server cannot be
    ///   reached; what ``init(configuration:maximumConnections:)`` throws.
    public convenience init(
        url: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        maximumConnections: Int = PostgreSQLDatabase.defaultMaximumConnections
    ) async throws {
        let configuration = try PostgreSQLConnectionURL.configuration(from: url, environment: environment)
        try await self.init(configuration: configuration, maximumConnections: maximumConnections)
    }

    /// How many pooled connections a process opens to one server (per role and database)
    /// unless told otherwise: 2. With the listening connection, a process holds at most 3.
    public static let defaultMaximumConnections = ServerLink.defaultMaximumConnections

    /// Opens a database with a postgres-nio client configuration, creating or migrating the
    /// `magicmirror` schema as needed.
    ///
    /// Every database of a process opened for the same server, role and database shares its
    /// connections: one pool of at most `maximumConnections` (the first database opened
    /// sets it) for commits and reads, and one listening connection for every subscription
    /// (see "Connections" in the article "Running on PostgreSQL").
    ///
    /// - Parameters:
    ///   - configuration: Where and how to connect (TLS included). Its
    ///     `options.maximumConnections` is replaced by `maximumConnections`.
    ///   - maximumConnections: How many pooled connections the process opens to this
    ///     server at most; ``defaultMaximumConnections`` (2) unless given.
    /// - Throws: ``MirrorError/Kind/unavailable`` when the server cannot be reached (at once,
    ///   naming the cause, when it refuses the connection: nothing listens on the port, too
    ///   many connections); ``MirrorError/Kind/permissionDenied`` for an unknown role or a
    ///   refused password, or when the role may not create a missing schema (the message says
    ///   how to fix it); ``MirrorError/Kind/unsupportedFormat`` for a schema newer than this
    ///   package.
    ///
    /// > Important: The sessions' `search_path` is set to `pg_catalog, pg_temp` whatever
    /// > `configuration` says, so that no function another role created is run in a
    /// > built-in's place.
    public convenience init(
        configuration: PostgresClient.Configuration,
        maximumConnections: Int = PostgreSQLDatabase.defaultMaximumConnections
    ) async throws {
        try await self.init(
            configuration: configuration, maximumConnections: maximumConnections,
            writerID: "pg-" + UUID().uuidString.lowercased())
    }

    /// Opens a database that commits as `writerID`.
    init(configuration: PostgresClient.Configuration, maximumConnections: Int, writerID: String) async throws {
        var configuration = configuration
        // Every statement of this package, and the migrations' function bodies and policies,
        // find built-in functions and operators first and nothing from `public`, where other
        // roles may have defined look-alikes (see "Running on PostgreSQL").
        configuration.options.additionalStartupParameters.removeAll { $0.0 == "search_path" }
        configuration.options.additionalStartupParameters.append(("search_path", Self.searchPath))
        var logger = Logger(label: "MagicMirrorPostgreSQL", factory: { _ in SwiftLogNoOpLogHandler() })
        logger.logLevel = .critical
        self.logger = logger
        let link = ServerLink.acquire(configuration, maximumConnections: maximumConnections, logger: logger)
        self.link = link
        role = configuration.username
        self.writerID = writerID
        assetCache = AssetCache(writer: writerID)
        do {
            // A server that went away while this opens would hold it forever: give up as
            // timedOut (transient), which the caller may retry.
            let silent = logger
            (identifier, baseGeneration) = try await withDeadline(serverDeadline, "opening the database") {
                try await PostgreSQLSchema.migrate(link, logger: silent)
            }
        } catch {
            link.release()
            throw PostgreSQLErrors.openingError(error, role: configuration.username, database: configuration.database)
        }
        listening = Listening(
            context: Listening.Context(link: link, logger: logger, identifier: identifier, writer: writerID))
    }

    deinit {
        listening.stop()
        assetCache.remove()
        if !released.withLock({ $0 }) { link.release() }
    }

    /// Ends every connection and subscription, and removes the asset files
    /// ``fileURL(for:in:)`` downloaded. Calls after it fail.
    public func close() async {
        listening.stop()
        assetCache.remove()
        let release = released.withLock { released in
            defer { released = true }
            return !released
        }
        if release { await link.release()?.value }
    }

    // MARK: - RecordDatabase

    /// Commits a batch atomically, in one transaction that also sends the `NOTIFY`.
    ///
    /// A commit is one statement, so one round trip to the server: a call of the schema's
    /// function `magicmirror.commit_records`, which takes the zone's commit lock and row
    /// (commits to one zone wait for each other there, in the order they came, instead of
    /// starting again), checks the base versions against the stored records, and writes
    /// every record, moves the zone's sequence and sends the `NOTIFY`, or writes nothing.
    /// It runs with the rights of the connection's role, so row-level security decides
    /// what it may write (see the article "Running on PostgreSQL").
    ///
    /// A commit that deletes a record of a type that delete rules target
    /// (``registerDeleteRules(_:referringType:in:)``) is one transaction instead, with every
    /// change the rules make: it locks the zones involved, finds the referring records,
    /// and stores the cascaded deletes and emptied references, or refuses the whole commit
    /// for a deny rule (``MirrorError/Kind/refused``, nothing stored).
    ///
    /// - Parameters:
    ///   - operations: The saves and deletes, at most one per record.
    ///   - zone: The zone they apply to.
    /// - Returns: The result of each operation and the zone's token afterwards.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/permissionDenied`` for another
    ///   role's private zone, ``MirrorError/Kind/unavailable`` when the server cannot be
    ///   reached (nothing is stored then; a retry of the same operations is recognised),
    ///   ``MirrorError/Kind/refused`` when a deny rule holds.
    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try Self.refuseOversizedRecords(operations, in: zone)
        if zone.scope == .shared { return try await commitSharedEdits(operations, to: zone) }
        try RecordOperation.validate(operations, in: zone)
        guard !operations.isEmpty else { return CommitOutcome(results: [], token: try await currentToken(in: zone)) }
        let key = ZoneKey(zone)
        let writer = PostgreSQLActingUser.current?.writerID ?? writerID
        let logger = logger
        let result: ZoneCommit.Result
        do {
            let link = link
            let commit = ZoneCommit(operations: operations, zone: zone, key: key, writer: writer)
            result = try await withDeadline(serverDeadline, "committing to \(zone)") {
                // A relay's commit in one statement, which acts as its user itself (no
                // transaction of the acting user's around it); a linked one as usual.
                if let function = PostgreSQLActingUser.current?.commitFunction,
                   let result = try await PostgreSQLActingUser.$current.withValue(nil, operation: {
                       try await link.withConnection { try await commit.run(through: function, on: $0, logger: logger) }
                   }) {
                    return result
                }
                return try await link.withConnection { try await commit.run(on: $0, logger: logger) }
            }
        } catch {
            throw explainingOtherUsersZone(PostgreSQLErrors.mirrorError(error, "committing to \(zone)", zone: zone), zone)
        }
        if !result.changed.isEmpty {
            listening.deliverOwnCommit(
                result.changed, in: zone, after: result.previous, token: result.outcome.token)
        }
        for linked in result.linked {
            listening.deliverOwnCommit(linked.changed, in: linked.zone, after: linked.previous, token: linked.token)
        }
        return result.outcome
    }

    /// Every live record of a zone, with the token they reflect.
    ///
    /// A zone is read in pages of one snapshot, each with the 30-second deadline of an
    /// operation, so a zone of millions of records opens (see "Running on PostgreSQL").
    ///
    /// - Parameter zone: The zone to read.
    /// - Returns: A complete change set.
    /// - Throws: A ``MirrorError``.
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try await read(zone, since: nil)
    }

    /// The live records with the given ids, in the order asked.
    ///
    /// - Parameters:
    ///   - recordIDs: The ids to fetch.
    ///   - zone: The zone to read.
    /// - Returns: The live records among `recordIDs`.
    /// - Throws: A ``MirrorError``.
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try zone.validate()
        if zone.scope == .shared { return try await fetchShared(recordIDs, in: zone) }
        let key = ZoneKey(zone)
        let logger = logger
        do {
            let link = link
            let found = try await withDeadline(serverDeadline, "fetching from \(zone)") {
                try await link.withConnection { connection in
                    try await RecordRows.zoneAndRecords(key, ids: recordIDs, on: connection, logger: logger)?.1 ?? [:]
                }
            }
            return recordIDs.compactMap { id in found[RecordKey(id)].flatMap { $0.isDeleted ? nil : $0 } }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "fetching from \(zone)", zone: zone)
        }
    }

    /// The changes of a zone after `token`; the complete zone for a token of another
    /// generation or from the future.
    ///
    /// - Parameters:
    ///   - zone: The zone to read.
    ///   - token: The token the reader has.
    /// - Returns: The changes since `token`.
    /// - Throws: A ``MirrorError``.
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await read(zone, since: token)
    }

    private func read(_ zone: ZoneID, since token: ChangeToken?) async throws -> ChangeSet {
        let (changes, _) = try await PostgreSQLReads.changes(
            in: zone, since: token, link: link, logger: logger, paging: readPaging.withLock { $0 })
        listening.note(changes.token, of: zone)
        return changes
    }

    /// The zone's current token.
    ///
    /// - Parameter zone: The zone to read.
    /// - Returns: ``ChangeToken/initial`` for a zone never written.
    /// - Throws: A ``MirrorError``.
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try zone.validate()
        let key = ZoneKey(zone)
        let logger = logger
        do {
            let link = link
            let token = try await withDeadline(serverDeadline, "reading the token of \(zone)") {
                try await link.withConnection { connection in
                    try await ZoneRow.read(key, on: connection, logger: logger)?.token ?? .initial
                }
            }
            listening.note(token, of: zone)
            return token
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading the token of \(zone)", zone: zone)
        }
    }

    /// Calls `handler` for every commit to `zone`, by this or any other process, heard
    /// through `LISTEN`.
    ///
    /// - Parameters:
    ///   - zone: The zone to watch.
    ///   - handler: Called on an arbitrary thread; must not block.
    /// - Returns: The subscription; it ends when cancelled or deallocated.
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone.
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        return listening.add(zone, handler: handler)
    }
}
