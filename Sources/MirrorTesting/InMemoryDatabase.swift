import Foundation
import MagicMirror
import Synchronization

/// A `RecordDatabase` that keeps everything in memory, with the same semantics as
/// `JSONFileDatabase`: versions, conflicts, idempotent retries, atomic commits, change
/// tokens and subscriptions.
///
/// Use it to test code that uses `Mirror` without touching the disk:
///
/// ```swift
/// let database = InMemoryDatabase()
/// let mirror = try await Mirror<Todo>(database: database, scope: .public)
/// ```
///
/// Several `InMemoryDatabase` instances can share one store, as several processes share one
/// JSON-file database: ``writer(named:)`` returns another instance (with its own
/// ``writerID``) over the same records, whose commits reach this instance's subscriptions.
///
/// Beyond the protocol it offers what tests need:
///
/// - **Fault injection** (per instance): ``failNextCommits(_:with:in:)``,
///   ``failNextReads(_:with:in:)``, ``availability``, ``commitLatency`` and
///   ``readLatency``.
/// - **Simulated other writers**: ``simulateSave(_:scope:user:by:)``,
///   ``simulateDelete(_:scope:user:by:)`` and their raw variants, which change the records
///   as another process would and notify every subscription.
/// - **Sharing** (``share(_:in:with:access:)``): records shared with other users, read
///   in their shared scope, as on the JSON-file database.
/// - **Relationships and assets**: it enforces delete rules (a `RelationshipDatabase`) and
///   stores assets in memory (an `AssetDatabase`, ``storeAsset(_:in:)``), so every feature
///   of MagicMirror — assets, relationships, sharing, sealing, migrations, live views —
///   works on it as on the JSON-file database.
/// - **Inspection**: ``records(_:scope:user:)``, ``storedRecords(in:includingDeleted:)``,
///   ``storedRecord(_:in:)``, ``commitLog``, ``commitLogUpdates``, and the commits running
///   now: ``commitsInProgress`` and ``commitsInProgressUpdates``.
///
/// To wait for a mirror on it to reach a state, use the waits MirrorTesting adds to
/// `Mirror`: `waitUntil(timeout:_:_:)`, `waitUntilCommitted(timeout:)`,
/// `waitUntilPendingChanges(timeout:_:_:)` and `waitForLastError(timeout:_:where:)`.
///
/// > Important: Every method may be called from any thread or task, concurrently. Faults
/// > belong to one instance: those set on this instance do not affect the instances made
/// > with ``writer(named:)`` nor the simulated writers, just as a failing connection in one
/// > process does not stop the others.
public final class InMemoryDatabase: RecordDatabase, Sendable {
    /// The database's identifier, shared by every instance made with ``writer(named:)``.
    public let identifier: String
    /// The id this instance's commits carry: `memory-` and eight hex digits, or the name
    /// given to ``writer(named:)``.
    public let writerID: String

    /// The records, history, commit log and subscriptions, shared with every instance made
    /// by ``writer(named:)``.
    let store: Store
    /// This instance's injected faults.
    let faults = Mutex(FaultState())

    /// Creates an empty database.
    ///
    /// - Parameter identifier: The database's identifier; a new UUID by default.
    public init(identifier: String = UUID().uuidString) {
        self.identifier = identifier
        self.writerID = "memory-" + UUID().uuidString.prefix(8).lowercased()
        self.store = Store()
    }

    private init(identifier: String, writerID: String, store: Store) {
        self.identifier = identifier
        self.writerID = writerID
        self.store = store
    }

    /// Another writer over the same records, as another process opening the same database
    /// would be: its commits carry its own writer id and are delivered to every
    /// subscription of every instance sharing the store.
    ///
    /// The new instance starts without faults; this instance's faults do not apply to it.
    ///
    /// - Parameter name: The new instance's ``writerID``.
    public func writer(named name: String) -> InMemoryDatabase {
        InMemoryDatabase(identifier: identifier, writerID: name, store: store)
    }

    /// Commits a batch of operations on one zone, atomically (see `RecordDatabase`).
    ///
    /// Before the operations are checked, the injected faults apply in this order: the
    /// ``commitLatency`` elapses, then the commit fails when ``availability`` is not
    /// ``Availability/available``, then when a failure from ``failNextCommits(_:with:in:)``
    /// is due. Every call is logged in ``commitLog`` when it ends, and counted in
    /// ``commitsInProgress`` while it runs.
    ///
    /// - Throws: A `MirrorError`: an injected one, `MirrorError.Kind.cancelled` when the
    ///   task is cancelled during the latency, or an invalid name or record. Nothing is
    ///   stored then, and the error says so (`MirrorError.nothingStored`).
    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        if zone.scope == .shared { return try await commitSharedEdits(operations, to: zone) }
        store.countCommitInProgress(+1)
        defer { store.countCommitInProgress(-1) }
        do {
            try await injectLatency(of: .commit, zone: zone)
            try injectFailure(of: .commit, zone: zone, recordIDs: operations.map(\.recordID))
            try ZoneState.validate(operations, zone: zone)
            try store.checkAssetReferences(of: operations, in: zone)
        } catch {
            store.logFailure(error, zone: zone, writer: writerID, operations: operations, simulated: false)
            var failure = error
            failure.nothingStored = true
            throw failure
        }
        defer { store.endAssetLeases(of: operations, in: zone) }
        if let outcome = try store.performLinked(
            operations, to: zone, writer: writerID, databaseIdentifier: identifier)
        {
            return outcome
        }
        return try store.perform(
            operations, to: zone, writer: writerID, databaseIdentifier: identifier, simulated: false
        ).outcome
    }

    /// Every live record of a zone (see `RecordDatabase`).
    ///
    /// - Throws: An injected `MirrorError` (after the ``readLatency``), or
    ///   `MirrorError.Kind.invalidName` for an invalid zone.
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        if zone.scope == .shared { return try await sharedFetchAll(in: zone) }
        try await prepareRead(of: zone)
        return store.contents.withLock { contents in
            (contents.zones[zone] ?? ZoneState()).completeChangeSet
        }
    }

    /// The live records with the given ids (see `RecordDatabase`).
    ///
    /// - Throws: An injected `MirrorError` (after the ``readLatency``), or
    ///   `MirrorError.Kind.invalidName` for an invalid zone.
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        if zone.scope == .shared { return try await sharedFetch(recordIDs, in: zone) }
        try await prepareRead(of: zone, recordIDs: recordIDs)
        return store.contents.withLock { ($0.zones[zone] ?? ZoneState()).fetch(recordIDs) }
    }

    /// The changes of a zone after `token` (see `RecordDatabase`).
    ///
    /// - Throws: An injected `MirrorError` (after the ``readLatency``), or
    ///   `MirrorError.Kind.invalidName` for an invalid zone.
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        if zone.scope == .shared { return try await sharedChanges(in: zone, since: token) }
        try await prepareRead(of: zone)
        return store.contents.withLock { ($0.zones[zone] ?? ZoneState()).changes(since: token) }
    }

    /// The zone's current token (see `RecordDatabase`).
    ///
    /// - Throws: An injected `MirrorError` (after the ``readLatency``), or
    ///   `MirrorError.Kind.invalidName` for an invalid zone.
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        if zone.scope == .shared { return try await sharedToken(in: zone) }
        try await prepareRead(of: zone)
        return store.contents.withLock { ($0.zones[zone] ?? ZoneState()).token }
    }

    /// Calls `handler` for every commit to `zone` (see `RecordDatabase`).
    ///
    /// Injected faults do not affect subscribing nor the delivery of notifications.
    ///
    /// - Throws: `MirrorError.Kind.invalidName` for an invalid zone.
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        if zone.scope == .shared { return try sharedSubscribe(to: zone, handler: handler) }
        try zone.validate()
        return store.subscribers.add(zone, handler: handler)
    }

    /// Drops the tombstones and history of a zone and starts its next generation, as the
    /// JSON-file database's compaction does. Readers holding an older token then get the
    /// complete zone from ``changes(in:since:)``.
    public func compact(_ zone: ZoneID) {
        store.contents.withLock { contents in
            guard let generation = contents.zones[zone]?.token.generation else { return }
            contents.zones[zone]?.compact(toGeneration: generation + 1)
        }
    }

    /// The latency and injected failures of a read, then the zone's validation.
    private func prepareRead(of zone: ZoneID, recordIDs: [String] = []) async throws(MirrorError) {
        try await injectLatency(of: .read, zone: zone)
        try injectFailure(of: .read, zone: zone, recordIDs: recordIDs)
        try zone.validate()
    }

    /// The records shared by every instance made with ``writer(named:)``.
    final class Store: Sendable {
        struct Contents: Sendable {
            var zones: [ZoneID: ZoneState] = [:]
            var log: [CommitLogEntry] = []
            /// The delete rules of each scope space (`ZoneID.spaceKey`), enforced by commits.
            var deleteRules: [String: [StoredDeleteRule]] = [:]
            /// Grows with every change of `log`, so readers of ``CommitLogUpdates`` know
            /// whether they saw the latest log.
            var logVersion = 0
            /// Readers of ``CommitLogUpdates`` suspended until the log changes; each is
            /// resumed with the log and its version.
            var logWaiters: [Int: CheckedContinuation<(log: [CommitLogEntry], version: Int)?, Never>] = [:]
            var nextLogWaiter = 0
            /// Calls of `commit` that started and did not return yet.
            var commitsInProgress = 0
            /// The readers of ``InMemoryDatabase/commitsInProgressUpdates``.
            var progressReaders: [Int: AsyncStream<Int>.Continuation] = [:]
            var nextProgressReader = 0
            /// The assets of each zone, by digest (see InMemoryDatabase+Assets.swift).
            var assets: [ZoneID: [String: Data]] = [:]
            /// The assets stored that no commit has referred to yet: kept by collections.
            var leasedAssets: [ZoneID: Set<String>] = [:]

            /// Appends to the log and wakes its readers.
            mutating func log(
                _ result: CommitLogEntry.Result, zone: ZoneID, writer: String,
                operations: [RecordOperation], simulated: Bool
            ) {
                log.append(CommitLogEntry(
                    index: log.count, zone: zone, writer: writer, operations: operations,
                    result: result, time: Date(), isSimulated: simulated))
                logChanged()
            }

            /// Wakes the readers of the log after a change.
            mutating func logChanged() {
                logVersion += 1
                let waiters = logWaiters
                logWaiters.removeAll()
                for waiter in waiters.values { waiter.resume(returning: (log, logVersion)) }
            }
        }

        let contents = Mutex(Contents())
        let subscribers = SubscriberList()
        /// The files ``InMemoryDatabase/fileURL(for:in:)`` writes, removed with the store.
        let assetFiles = AssetFiles()

        /// Applies a commit that passed validation and the injected faults, logs it and
        /// delivers its notifications before returning.
        ///
        /// - Parameters:
        ///   - rebase: Base every operation on the stored version first, as a simulated
        ///     writer that just read the record would (under the same lock, so it never
        ///     conflicts).
        ///   - check: Runs under the lock before anything is stored; an error it throws is
        ///     logged and thrown, and nothing is stored.
        func perform(
            _ operations: [RecordOperation], to zone: ZoneID, writer: String,
            databaseIdentifier: String, simulated: Bool, rebase: Bool = false,
            check: (ZoneState) throws(MirrorError) -> Void = { _ in }
        ) throws(MirrorError) -> (outcome: CommitOutcome, operations: [RecordOperation]) {
            let clock = HybridLogicalClock.shared
            let (outcome, applied, notifications) = try contents.withLock {
                contents throws(MirrorError) in
                var operations = operations
                // Read through a copy (cheap: its storage is shared), but change the zone in
                // place in the dictionary: a copy that is then mutated would duplicate every
                // record of the zone, making each commit cost time in proportion to its size.
                let before = contents.zones[zone] ?? ZoneState()
                do throws(MirrorError) {
                    try check(before)
                } catch {
                    contents.log(.failed(error), zone: zone, writer: writer, operations: operations, simulated: simulated)
                    throw error
                }
                if rebase {
                    for index in operations.indices {
                        operations[index].baseVersion = before.records[operations[index].recordID]?.version ?? 0
                    }
                }
                switch before.prepare(operations, writer: writer) {
                case .failure(let conflict):
                    contents.log(
                        .completed(conflict.outcome), zone: zone, writer: writer,
                        operations: operations, simulated: simulated)
                    return (conflict.outcome, operations, [RemoteNotification]())
                case .success(let prepared):
                    let changed = prepared.compactMap { $0 }
                    if !changed.isEmpty {
                        // Drop the copy first, so the zone's storage is uniquely referenced.
                        _ = consume before
                        let sequence = (contents.zones[zone]?.token.sequence ?? 0) + 1
                        contents.zones[zone, default: ZoneState()].apply(changed, sequence: sequence)
                    }
                    let state = contents.zones[zone] ?? ZoneState()
                    for operation in operations { clock.observe(operation.timestamp) }
                    let outcome = state.outcome(for: prepared, of: operations)
                    contents.log(
                        .completed(outcome), zone: zone, writer: writer, operations: operations,
                        simulated: simulated)
                    let notifications = state.notifications(
                        for: changed, databaseIdentifier: databaseIdentifier, zone: zone, writer: writer)
                    return (outcome, operations, notifications)
                }
            }
            subscribers.deliver(notifications)
            return (outcome, applied)
        }

        /// Counts a commit that starts (`+1`) or ends (`-1`), and tells the readers of
        /// ``InMemoryDatabase/commitsInProgressUpdates``.
        func countCommitInProgress(_ change: Int) {
            contents.withLock { contents in
                contents.commitsInProgress += change
                for reader in contents.progressReaders.values { reader.yield(contents.commitsInProgress) }
            }
        }

        /// Logs a commit that threw before reaching the records.
        func logFailure(
            _ error: MirrorError, zone: ZoneID, writer: String, operations: [RecordOperation],
            simulated: Bool
        ) {
            contents.withLock {
                $0.log(.failed(error), zone: zone, writer: writer, operations: operations, simulated: simulated)
            }
        }
    }
}
