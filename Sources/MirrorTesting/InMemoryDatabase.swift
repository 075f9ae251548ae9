import Foundation
import MagicMirror
import Synchronization

/// A ``RecordDatabase`` that keeps everything in memory, with the same semantics as
/// ``JSONFileDatabase``: versions, conflicts, idempotent retries, atomic commits, change
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
public final class InMemoryDatabase: RecordDatabase, Sendable {
    public let identifier: String
    public let writerID: String

    let store: Store

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
    /// - Parameter name: The new instance's ``writerID``.
    public func writer(named name: String) -> InMemoryDatabase {
        InMemoryDatabase(identifier: identifier, writerID: name, store: store)
    }

    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try ZoneState.validate(operations, zone: zone)
        let clock = HybridLogicalClock.shared
        let result: (CommitOutcome, [RemoteNotification]) = store.zones.withLock { zones in
            var state = zones[zone] ?? ZoneState()
            switch state.prepare(operations, writer: writerID) {
            case .failure(let conflict):
                return (conflict.outcome, [])
            case .success(let prepared):
                let changed = prepared.compactMap { $0 }
                if !changed.isEmpty {
                    state.apply(changed, sequence: state.token.sequence + 1)
                    zones[zone] = state
                }
                for operation in operations { clock.observe(operation.timestamp) }
                let outcome = state.outcome(for: prepared, of: operations)
                let notifications = state.notifications(
                    for: changed, databaseIdentifier: identifier, zone: zone, writer: writerID)
                return (outcome, notifications)
            }
        }
        store.subscribers.deliver(result.1)
        return result.0
    }

    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try zone.validate()
        return store.zones.withLock { zones in
            let state = zones[zone] ?? ZoneState()
            return ChangeSet(records: state.liveRecords, token: state.token, isComplete: true)
        }
    }

    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try zone.validate()
        return store.zones.withLock { ($0[zone] ?? ZoneState()).fetch(recordIDs) }
    }

    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try zone.validate()
        return store.zones.withLock { ($0[zone] ?? ZoneState()).changes(since: token) }
    }

    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try zone.validate()
        return store.zones.withLock { ($0[zone] ?? ZoneState()).token }
    }

    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> DatabaseSubscription {
        try zone.validate()
        return store.subscribers.add(zone, handler: handler)
    }

    /// Drops the tombstones and history of a zone and starts its next generation, as the
    /// JSON-file database's compaction does. Readers holding an older token then get the
    /// complete zone from ``changes(in:since:)``.
    public func compact(_ zone: ZoneID) {
        store.zones.withLock { zones in
            guard var state = zones[zone] else { return }
            state.compact(toGeneration: state.token.generation + 1)
            zones[zone] = state
        }
    }

    /// The records shared by every instance made with ``writer(named:)``.
    final class Store: Sendable {
        let zones = Mutex<[ZoneID: ZoneState]>([:])
        let subscribers = SubscriberList()
    }
}
