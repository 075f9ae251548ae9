import Foundation
import Synchronization

/// A ``RecordDatabase`` that keeps a durable local replica of a remote database, so that
/// mirrors open, read and change records while the remote is away, and lose nothing.
///
/// The replica is a ``JSONFileDatabase`` on this machine. Every commit goes to the replica:
/// when it returns, the change is as durable as any JSON-file commit (it survives the
/// process being killed) and waits in the replica's outbox. In the background, the
/// database pushes waiting changes to the remote, oldest first, each based on the remote
/// version it was made from, and pulls the remote's changes since the replica's token.
/// When the remote cannot be reached, it keeps trying with backoff and changes keep
/// landing in the replica.
///
/// ```swift
/// let replicated = ReplicatedDatabase(
///     local: try JSONFileDatabase(directory: replicaDirectory),
///     remote: server)
/// let todos = try await Mirror<Todo>(database: replicated)   // opens from the replica
/// todos.dataModel.append(Todo(title: "Milk"))
/// try await todos.flush()              // durable in the replica
/// try await replicated.synchronize()   // accepted by the remote
/// ```
///
/// See <doc:WorkingOffline> for the whole story.
///
/// ## Conflicts
///
/// A change pushed after the remote's record moved on conflicts there. The conflict policy
/// of an open ``Mirror`` of the record's type settles it, exactly as it settles the
/// mirror's own conflicts (a three-way merge by field against the remote version the
/// change was made from, by default); the result is stored in the replica, shown by the
/// mirrors and pushed. While no mirror of the type is open in the process, the change is
/// held and reported, and settled once one opens. A change is never pushed twice: a retry
/// of a push the remote already stored (by this or an earlier process) is recognised by its
/// clock reading and fields.
///
/// ## Processes
///
/// Processes on one machine that open the same replica directory over the same remote
/// share it as they share any ``JSONFileDatabase``: they see each other's changes at once,
/// conflicts between them are settled locally, and any of them pushes what waits. A zone is
/// synchronised once something in the process used it (a mirror opened on it, for
/// example). Open one `ReplicatedDatabase` per replica and remote in a process.
///
/// ## The replica on disk
///
/// Each zone of the replica holds, for every record, the record as the remote last showed
/// it, the local change waiting for the remote, and the record as mirrors see it (its
/// version is the replica's own); plus one record, `~replication`, holding the remote's
/// change token. That id is reserved: commits naming it are refused. Private zones are
/// private zones of the replica: directories 0700, files 0600, one directory per user.
///
/// When the replica's files have entries that cannot be read (the JSON-file database
/// quarantines them and reports ``MirrorError/Kind/corruptEntry``), the zone's records are
/// reloaded from the remote, the local changes found in the readable entries are kept and
/// pushed, and the rebuild is reported once in ``problems``. A deleted replica is a new,
/// empty one, filled from the remote.
public final class ReplicatedDatabase: RecordDatabase {
    /// The replica: where every commit lands first and every read is served from.
    public let local: JSONFileDatabase
    /// The database the replica is synchronised with.
    public let remote: any RecordDatabase

    /// Identifies the replica together with its remote, the same in every process that
    /// opens them (`replica-<local identifier>-of-<remote identifier>`).
    public let identifier: String

    /// The replica's writer id: changes committed through this instance carry it until the
    /// remote accepts them.
    public var writerID: String { local.writerID }

    /// The remote's connected user (see ``RecordDatabase/connectedUser``): the replica holds
    /// what the remote lets that user reach.
    public var connectedUser: MirrorUser? { remote.connectedUser }

    /// The record id each replica zone reserves for its synchronisation state.
    static let stateRecordID = "~replication"

    let replication: Mutex<ReplicationState>
    let statusObservers = Mutex<(next: Int, all: [Int: AsyncStream<ReplicationStatus>.Continuation])>((0, [:]))
    let subscribers = SubscriberList()
    let settlers = Mutex<(next: Int, byType: [String: [Int: @Sendable (PushConflict) -> PushResolution?]])>((0, [:]))
    let wakeup = Wakeup()
    let exchangeGate = AsyncGate()
    let backoff: MirrorConfiguration
    let worker = Mutex<Task<Void, Never>?>(nil)

    /// Opens a replicated database over `remote`, with its replica in `local`.
    ///
    /// Nothing is read from the remote here: the database opens at once, and mirrors opened
    /// on it load from the replica. Synchronising starts in the background.
    ///
    /// - Parameters:
    ///   - local: The replica. Use a directory of its own for each remote (and, to keep
    ///     users apart beyond their private zones, for each operating-system user).
    ///   - remote: The database to synchronise with.
    ///   - retryDelay: How long to wait before retrying an exchange that failed because the
    ///     remote could not be reached; each further failure doubles it.
    ///   - maximumRetryDelay: The longest wait between retries.
    public init(
        local: JSONFileDatabase,
        remote: any RecordDatabase,
        retryDelay: Duration = .milliseconds(100),
        maximumRetryDelay: Duration = .seconds(30)
    ) {
        self.local = local
        self.remote = remote
        self.identifier = "replica-\(local.identifier)-of-\(remote.identifier)"
        self.backoff = MirrorConfiguration(retryDelay: retryDelay, maximumRetryDelay: maximumRetryDelay)
        self.replication = Mutex(ReplicationState())
        startWorker()
    }

    deinit {
        // End the subscriptions while the replica is still held: a JSON-file engine must not
        // be released from inside the cancellation of one of its own subscriptions.
        let subscriptions = replication.withLock { state in
            state.zones.values.flatMap { [$0.replicaSubscription, $0.remoteSubscription] }
        }
        for subscription in subscriptions { subscription?.cancel() }
        worker.withLock { $0 }?.cancel()
        wakeup.signal()
        for continuation in statusObservers.withLock({ Array($0.all.values) }) { continuation.finish() }
    }

    // MARK: Status

    /// Where the database stands with its remote now.
    public var status: ReplicationStatus { replication.withLock { $0.status } }

    /// The status now, then each time it changes, until the database is deallocated.
    ///
    /// Each transition is yielded once: a remote that stays unreachable while the database
    /// retries gives one ``ReplicationStatus/Phase/offline`` value, not one per retry.
    public var statusUpdates: AsyncStream<ReplicationStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ReplicationStatus.self, bufferingPolicy: .bufferingNewest(64))
        let key = statusObservers.withLock { observers in
            defer { observers.next += 1 }
            observers.all[observers.next] = continuation
            return observers.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.statusObservers.withLock { $0.all.removeValue(forKey: key) }
        }
        continuation.yield(status)
        return stream
    }

    /// Every problem reported so far, oldest first (at most the last 100): losing and
    /// regaining the remote is not one, but going offline is (once per outage), and so is each
    /// held change and each replica zone rebuilt from the remote.
    ///
    /// Each is also posted once as a notification named `.mirrorError` whose `object` is the
    /// ``MirrorError``.
    public var problems: [MirrorError] { replication.withLock { $0.problems } }

    /// Exchanges changes with the remote now and returns when every change committed through
    /// the replica before the call was accepted by the remote (or settled by a conflict
    /// policy), and the remote's changes up to now are in the replica.
    ///
    /// ``Mirror/flush()`` waits for *local* durability: the changes are in the replica and
    /// survive the process being killed, whether the remote is reachable or not. Call this
    /// after it when you need the remote to have them:
    ///
    /// ```swift
    /// try await todos.flush()              // in the replica, online or not
    /// try await replicated.synchronize()   // and on the remote
    /// ```
    ///
    /// Held changes are tried once more. It covers the zones this instance synchronises
    /// (those something in this process used).
    ///
    /// - Throws: A ``MirrorError``: the remote's failure when it cannot be reached (kind
    ///   ``MirrorError/Kind/unavailable``, for example; the changes stay in the replica and
    ///   the background retries go on), or the failure of a change that is still held.
    public func synchronize() async throws {
        await exchangeGate.acquire()
        defer { exchangeGate.release() }
        if let failure = await exchange(retryingHeld: true) { throw failure }
        if let held = replication.withLock({ $0.firstHeldError }) { throw held }
    }

    // MARK: RecordDatabase

    /// Commits to the replica; the changes are pushed to the remote in the background.
    ///
    /// Conflicts are checked against the replica (the versions mirrors see), atomically,
    /// across every process sharing it. When this returns, the changes are as durable as a
    /// ``JSONFileDatabase`` commit, whether the remote is reachable or not.
    ///
    /// - Parameters:
    ///   - operations: The saves and deletes, at most one per record.
    ///   - zone: The zone they apply to.
    /// - Returns: The result of each operation, as mirrors see the records, and the
    ///   replica's token afterwards.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/invalidName`` for an invalid name or
    ///   the reserved id `~replication`, ``MirrorError/Kind/invalidRecord`` for fields that
    ///   are not a JSON object, or the replica's failure. Nothing is stored then; the error
    ///   says so with ``MirrorError/nothingStored`` where that is known.
    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try MirrorError.beforeStoring { () throws(MirrorError) in
            try ZoneState.validate(operations, zone: zone)
            if let reserved = operations.first(where: { $0.recordID == Self.stateRecordID }) {
                throw MirrorError(
                    .invalidName, "record id \(Self.stateRecordID) is reserved by ReplicatedDatabase",
                    recordIDs: [reserved.recordID], recordType: zone.recordType, scope: zone.scope)
            }
        }
        activate(zone)
        guard !operations.isEmpty else {
            return CommitOutcome(results: [], token: try await local.currentToken(in: zone))
        }
        HybridLogicalClock.shared.observe(latestOf: operations.lazy.map(\.timestamp))
        let ids = operations.map(\.recordID)
        for _ in 0..<Self.replicaAttempts {
            let stored: [String: StoredRecord]
            do {
                stored = try await replicaRecords(ids, in: zone)
            } catch {
                var failure = error
                failure.nothingStored = true
                throw failure
            }
            var results: [CommitOutcome.Result] = []
            var replicaOperations: [RecordOperation] = []
            var views: [StoredRecord] = []
            var waiting: [(String, HLCTimestamp?)] = []
            var conflicted = false
            for operation in operations {
                let record = stored[operation.recordID]
                let envelope = record.flatMap { self.envelope(of: $0) }
                let view = envelope?.view(operation.recordID)
                if let view, view.modified == operation.timestamp, view.writer == writerID {
                    results.append(.applied(view))   // a retry of a change already stored
                    continue
                }
                guard (view?.version ?? 0) == operation.baseVersion else {
                    conflicted = true
                    results.append(.conflict(current: view))
                    continue
                }
                let next = (envelope ?? ReplicaEnvelope()).applyingLocal(operation, writer: writerID)
                replicaOperations.append(.save(
                    operation.recordID, fields: next.encoded(), baseVersion: record?.version ?? 0,
                    timestamp: HybridLogicalClock.shared.now()))
                let nextView = next.view(operation.recordID)
                results.append(.applied(nextView))
                views.append(nextView)
                waiting.append((operation.recordID, next.local?.timestamp))
            }
            if conflicted {
                let marked = results.map { result -> CommitOutcome.Result in
                    if case .applied = result { return .notApplied }
                    return result
                }
                return CommitOutcome(results: marked, token: try await local.currentToken(in: zone))
            }
            guard !replicaOperations.isEmpty else {
                return CommitOutcome(results: results, token: try await local.currentToken(in: zone))
            }
            let outcome = try await local.commit(replicaOperations, to: zone)
            // Another writer changed one of the replica's records meanwhile: check again.
            guard outcome.isApplied else { continue }
            noteWaiting(waiting, in: zone)
            notify(views, in: zone, token: outcome.token, writer: writerID)
            wakeup.signal()
            return CommitOutcome(results: results, token: outcome.token)
        }
        throw busyReplica(zone)
    }

    /// Every live record of a zone, from the replica (see ``RecordDatabase/fetchAll(in:)``).
    ///
    /// Works whether the remote is reachable or not; a zone read for the first time starts
    /// being synchronised.
    ///
    /// - Returns: A complete change set with the replica's token.
    /// - Throws: A ``MirrorError`` when the replica cannot be read.
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        activate(zone)
        let set = try await local.fetchAll(in: zone)
        return ChangeSet(records: views(of: set.records).filter { !$0.isDeleted }, token: set.token, isComplete: true)
    }

    /// The live records with the given ids, from the replica (see
    /// ``RecordDatabase/fetch(_:in:)``).
    ///
    /// - Throws: A ``MirrorError`` when the replica cannot be read.
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        activate(zone)
        let records = try await local.fetch(recordIDs.filter { $0 != Self.stateRecordID }, in: zone)
        return views(of: records).filter { !$0.isDeleted }
    }

    /// The changes of a zone in the replica after `token` (see
    /// ``RecordDatabase/changes(in:since:)``).
    ///
    /// The replica's token also moves when the exchange with the remote writes it without
    /// changing what mirrors see (a push accepted, the remote's token recorded); such records
    /// come back unchanged.
    ///
    /// - Throws: A ``MirrorError`` when the replica cannot be read.
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        activate(zone)
        let set = try await local.changes(in: zone, since: token)
        var records = views(of: set.records)
        if set.isComplete { records.removeAll(where: \.isDeleted) }
        return ChangeSet(records: records, token: set.token, isComplete: set.isComplete)
    }

    /// The replica's current token of a zone.
    ///
    /// - Throws: A ``MirrorError`` when the replica cannot be read.
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        activate(zone)
        return try await local.currentToken(in: zone)
    }

    /// Calls `handler` for every change mirrors can see in `zone`: commits through this
    /// instance (before ``commit(_:to:)`` returns), the remote's changes as they are copied
    /// into the replica, and other processes' commits to the replica.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone.
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try zone.validate()
        activate(zone)
        return subscribers.add(zone, handler: handler)
    }
}

extension MirrorError {
    /// `error` as a ``MirrorError``: itself when it is one.
    static func wrapping(_ error: any Error, _ activity: String) -> MirrorError {
        if let error = error as? MirrorError { return error }
        if error is CancellationError { return MirrorError(.cancelled, "\(activity) was cancelled", underlying: error) }
        return MirrorError(.ioFailure, "\(activity) failed: \(error)", underlying: error)
    }
}
