import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror

/// A database served by a `mirror-relay` over HTTP: many users' apps on one PostgreSQL,
/// each acting only as the user its token names.
///
/// It uses `URLSession` only (FoundationNetworking on Linux), so an app on Linux, macOS or
/// iOS talks to a relay with no other dependency. Put it under a ``ReplicatedDatabase`` so
/// that the app opens, reads and writes offline, and converges through the relay when it is
/// back.
///
/// Every request carries the token that `tokenProvider` returns; when the relay answers
/// that the token expired, the provider is called again once and the request sent again. A
/// commit carries an idempotency key: sent again after a lost answer, it is applied once.
/// Subscriptions share one stream (`/v1/stream`, read through a `URLSession` data delegate);
/// a notification is only a hint. It is a
/// `SharingDatabase` and an `AssetDatabase`: assets are streamed both ways, an upload from
/// the file, a download into a file of a cache directory that the database removes when it
/// is released.
///
/// The user is the tokens' subject, named again as `user` when the database is opened: a
/// private or shared mirror opened without a user is that user's (``connectedUser``), and
/// the relay refuses any other user's private or shared zone.
///
/// ```swift
/// let relay = RelayDatabase(url: relayURL, user: user) {
///     try await signIn.currentToken()  // a JWT for `user`, from the app's sign-in service
/// }
/// let database = ReplicatedDatabase(local: try JSONFileDatabase(directory: replicaDirectory), remote: relay)
/// let todos = try await Mirror<Todo>(database: database, scope: .private)
/// ```
public final class RelayDatabase: RecordDatabase {
    /// `relay:` and the relay's URL: the same for every instance that talks to that relay.
    public let identifier: String
    /// A new id for each instance.
    public let writerID: String
    /// The user the tokens name: private and shared mirrors opened without a user are this
    /// user's.
    public let user: MirrorUser
    /// ``user``: the only user the relay acts for with these tokens.
    public var connectedUser: MirrorUser? { user }

    let transport: RelayTransport
    /// The directory of downloaded assets, removed with the database.
    let assetCache = RelayAssetCache()
    private let watch: RelayWatch
    /// How many records a page of ``fetchAll(in:)`` asks for.
    static let pageSize = 500
    /// How many times a commit is sent again, with the same key, after the relay could not
    /// be reached (the connection failed, or a balancer answered for it: a relay behind
    /// one that died after storing the commit is answered 502, and the commit sent again
    /// reaches another relay, which finds the key and stores nothing).
    static let commitRetries = 2
    /// The wait before the first retry of a commit; the second waits twice as long.
    static let commitRetryDelay = Duration.milliseconds(250)

    /// Opens a database served by the relay at `url`; nothing is sent until it is used.
    ///
    /// - Parameters:
    ///   - url: The relay's base URL, for example `https://relay.example.com`.
    ///   - user: The user the tokens name (their subject).
    ///   - session: The URL session requests go through; `nil` (the default) for one of the
    ///     library's own, with no cache and no cookies (nothing the relay answers is cached, and a
    ///     session's cache is looked up for every request, on disk on Linux).
    ///   - tokenProvider: Returns a token for `user` (a JWT the relay accepts); called for
    ///     the first request and again when the relay says the token expired.
    public init(
        url: URL, user: MirrorUser, session: URLSession? = nil,
        tokenProvider: @escaping @Sendable () async throws -> String
    ) {
        self.user = user
        identifier = "relay:" + url.absoluteString
        writerID = "relay-" + UUID().uuidString.lowercased()
        transport = RelayTransport(baseURL: url, session: session ?? RelayTransport.uncachedSession, tokenProvider: tokenProvider)
        watch = RelayWatch(transport: transport, identifier: identifier, writerID: writerID)
    }

    deinit {
        watch.stop()
        assetCache.remove()
    }

    /// Commits a batch of operations on one zone, atomically, through the relay.
    ///
    /// - Throws: A ``MirrorError``: the relay's (``MirrorError/Kind/permissionDenied`` for a
    ///   zone of another user), ``MirrorError/Kind/unavailable`` when the relay cannot be
    ///   reached (the commit may have been stored; committing it again is safe).
    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try RecordOperation.validate(operations, in: zone)
        let request = RelayWire.CommitRequest(zone: zone, writerID: writerID, operations: operations.map(RelayWire.Operation.init))
        let key = UUID().uuidString.lowercased()
        var attempt = 0
        while true {
            do {
                let answer = try await transport.post(
                    "commit", request, headers: ["Idempotency-Key": key], as: RelayWire.CommitResponse.self)
                let results = answer.results.compactMap(\.result)
                guard results.count == operations.count else {
                    throw MirrorError(.unavailable, "the relay answered a commit of \(operations.count) operations with \(results.count) results")
                }
                let outcome = CommitOutcome(results: results, token: answer.token)
                watch.deliverOwn(outcome, in: zone, writer: writerID)
                return outcome
            } catch let error as MirrorError where RelayTransport.couldNotReach(error) && attempt < Self.commitRetries {
                attempt += 1
                // A relay restarting, or a balancer moving to another: give it a moment.
                try await Task.sleep(for: Self.commitRetryDelay * attempt)
            }
        }
    }

    /// Every live record of the zone, read in pages, with the token they reflect.
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try zone.validate()
        var records: [StoredRecord] = []
        var after: String?
        var first: ChangeToken?
        var last = ChangeToken.initial
        repeat {
            let page = try await transport.post(
                "records", RelayWire.PageRequest(zone: zone, after: after, limit: Self.pageSize), as: RelayWire.Page.self)
            records += page.records.map(\.stored)
            first = first ?? page.token
            last = page.token
            after = page.next
        } while after != nil
        guard let first, first != last else {
            watch.note(last, of: zone)
            return ChangeSet(records: records, token: last, isComplete: true)
        }
        // Pages of different moments: bring them to one with the changes since the first.
        let changes = try await changes(in: zone, since: first)
        if changes.isComplete { return changes }
        var byID: [String: StoredRecord] = [:]
        for record in records { byID[record.id] = record }
        var order = records.map(\.id)
        for record in changes.records {
            if byID[record.id] == nil { order.append(record.id) }
            byID[record.id] = record
        }
        let live = order.compactMap { byID[$0] }.filter { !$0.isDeleted }
        return ChangeSet(records: live, token: changes.token, isComplete: true)
    }

    /// The live records with the given ids.
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try zone.validate()
        return try await transport.post(
            "fetch", RelayWire.FetchRequest(zone: zone, ids: recordIDs), as: RelayWire.Records.self
        ).records.map(\.stored)
    }

    /// The changes of the zone after `token`.
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try zone.validate()
        let changes = try await transport.post(
            "changes", RelayWire.ChangesRequest(zone: zone, since: token), as: RelayWire.Changes.self
        ).changeSet
        watch.note(changes.token, of: zone)
        return changes
    }

    /// The zone's current token.
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try zone.validate()
        let token = try await transport.post("token", RelayWire.TokenRequest(zone: zone), as: ChangeToken.self)
        watch.note(token, of: zone)
        return token
    }

    /// Calls `handler` for every commit to `zone`: this instance's before `commit`
    /// returns, others' when the relay's hint arrives.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone.
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        return watch.add(zone, handler: handler)
    }
}
