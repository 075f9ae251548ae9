import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// The subscriptions of one ``PostgreSQLDatabase`` and the task that listens for them.
///
/// State, all behind one mutex (never held while calling a handler or awaiting):
/// - `entries`: per subscribed zone, its handlers, its row number once known, and
///   `delivered`, the token up to which its handlers heard of every change;
/// - `known`: the latest token this instance read or wrote per zone, where a new
///   subscription starts (changes after it are delivered);
/// - `task`: the listening task, started by the first subscription;
/// - `outage`: whether the current loss of the connection was reported.
///
/// The listening task holds one pooled connection in `LISTEN magicmirror`. Each time it
/// (re)connects it pulls every subscribed zone since `delivered`, so a change committed
/// while it was away is delivered then; afterwards each `NOTIFY` of a subscribed zone
/// triggers a pull. Pulls run one at a time, on that task. A commit made through this
/// instance is delivered by ``deliverOwnCommit(_:in:after:token:)`` before `commit`
/// returns, and skipped by pulls (it carries this writer's id).
final class Listening: Sendable {
    typealias Handler = @Sendable (RemoteNotification) -> Void

    /// What the listening task needs of its database, without holding the database.
    struct Context: Sendable {
        let client: PostgresClient
        let logger: Logger
        let identifier: String
        let writer: String
    }

    private struct Entry {
        var zoneRow: Int?
        var delivered: ChangeToken
        var handlers: [Int: Handler] = [:]
    }

    private struct State {
        var entries: [ZoneID: Entry] = [:]
        var known: [ZoneID: ChangeToken] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
        var stopped = false
        var outage = false
    }

    /// The first wait before reconnecting, doubled after each failure up to ``maximumBackoff``.
    static let initialBackoff = Duration.milliseconds(50)
    /// The longest wait between two attempts to reconnect.
    static let maximumBackoff = Duration.seconds(2)

    private let context: Context
    private let state = Mutex(State())

    init(context: Context) {
        self.context = context
    }

    // MARK: - Subscriptions

    func add(_ zone: ZoneID, handler: @escaping Handler) -> MirrorCancellable {
        let id: Int? = state.withLock { state in
            guard !state.stopped else { return nil }
            let id = state.nextID
            state.nextID += 1
            if state.entries[zone] == nil {
                state.entries[zone] = Entry(zoneRow: nil, delivered: state.known[zone] ?? .initial)
            }
            state.entries[zone]?.handlers[id] = handler
            if state.task == nil {
                state.task = Task { [weak self] in await self?.listen() }
            }
            return id
        }
        guard let id else { return MirrorCancellable {} }
        return MirrorCancellable { [weak self] in
            self?.state.withLock { state in
                state.entries[zone]?.handlers[id] = nil
                if state.entries[zone]?.handlers.isEmpty == true { state.entries[zone] = nil }
            }
        }
    }

    /// Ends the listening task; no handler is called after it.
    func stop() {
        let task = state.withLock { state in
            state.stopped = true
            state.entries = [:]
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    /// Remembers a token read or written, where a later subscription of `zone` starts.
    func note(_ token: ChangeToken, of zone: ZoneID) {
        state.withLock { state in
            if let known = state.known[zone], known.generation == token.generation, known >= token { return }
            state.known[zone] = token
        }
    }

    /// Delivers a commit made through this instance to the subscribers of its zone.
    ///
    /// - Parameters:
    ///   - changed: The records the commit stored.
    ///   - previous: The zone's token before the commit; `delivered` moves on to `token`
    ///     only from there, so another writer's change in between is still pulled.
    ///   - token: The zone's token after the commit.
    func deliverOwnCommit(_ changed: [StoredRecord], in zone: ZoneID, after previous: ChangeToken, token: ChangeToken) {
        note(token, of: zone)
        let handlers = state.withLock { state -> [Handler] in
            guard var entry = state.entries[zone] else { return [] }
            if entry.delivered == previous { entry.delivered = token }
            state.entries[zone] = entry
            return Array(entry.handlers.values)
        }
        guard !handlers.isEmpty else { return }
        let notifications = RemoteNotification.grouping(
            changed, databaseIdentifier: context.identifier, zone: zone, token: token, writer: context.writer)
        for notification in notifications {
            for handler in handlers { handler(notification) }
        }
    }

    // MARK: - The listening task

    private func listen() async {
        var backoff = Self.initialBackoff
        let context = context
        while !Task.isCancelled {
            do {
                try await context.client.withConnection { connection in
                    try await connection.listen(on: NotificationPayload.channel) { notifications in
                        self.state.withLock { $0.outage = false }
                        backoff = Self.initialBackoff
                        // Heal: whatever was committed while not listening.
                        for zone in self.subscribedZones() { try await self.pull(zone) }
                        for try await notification in notifications {
                            guard let payload = NotificationPayload(notification.payload) else { continue }
                            for zone in self.zonesToPull(for: payload) { try await self.pull(zone) }
                        }
                    }
                }
                throw MirrorError(.unavailable, "the server ended the notification connection")
            } catch {
                if Task.isCancelled { return }
                report(error)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, Self.maximumBackoff)
            }
        }
    }

    /// Posts the loss of the connection once per outage, as a transient error.
    private func report(_ error: any Error) {
        let isNew = state.withLock { state in
            defer { state.outage = true }
            return !state.outage && !state.stopped
        }
        guard isNew else { return }
        let underlying = PostgreSQLErrors.mirrorError(error, "listening for notifications")
        var reported = MirrorError(
            .unavailable,
            "lost the connection that listens for other writers' changes to database "
                + "\(context.identifier); reconnecting, then pulling every subscribed zone "
                + "(\(underlying.message))")
        reported.underlying = underlying
        NotificationCenter.default.post(name: .mirrorError, object: reported)
    }

    private func subscribedZones() -> [ZoneID] {
        state.withLock { Array($0.entries.keys) }
    }

    /// The zones a notification may concern: those of its row, and those whose row is not
    /// known yet (their first pull learns it).
    private func zonesToPull(for payload: NotificationPayload) -> [ZoneID] {
        state.withLock { state in
            state.entries.compactMap { zone, entry in
                guard let row = entry.zoneRow else { return zone }
                guard row == payload.zone, payload.writer != context.writer else { return nil }
                if payload.generation == entry.delivered.generation, payload.sequence <= entry.delivered.sequence {
                    return nil
                }
                return zone
            }
        }
    }

    /// Reads a zone's changes since what its handlers heard and delivers them.
    private func pull(_ zone: ZoneID) async throws {
        guard let since = state.withLock({ $0.entries[zone]?.delivered }) else { return }
        let (changes, row) = try await PostgreSQLReads.changes(
            in: zone, since: since, client: context.client, logger: context.logger)
        let handlers = state.withLock { state -> [Handler] in
            guard var entry = state.entries[zone] else { return [] }
            entry.zoneRow = row ?? entry.zoneRow
            if changes.isComplete || entry.delivered.generation != changes.token.generation
                || entry.delivered < changes.token {
                entry.delivered = changes.token
            }
            state.entries[zone] = entry
            return Array(entry.handlers.values)
        }
        note(changes.token, of: zone)
        // This writer's own changes were delivered when committed.
        let foreign = changes.records.filter { $0.writer != context.writer }
        let writers = Set(foreign.map(\.writer))
        var notifications = RemoteNotification.grouping(
            foreign, databaseIdentifier: context.identifier, zone: zone, token: changes.token,
            writer: writers.count == 1 ? writers.first : nil)
        if changes.isComplete, notifications.isEmpty, since != .initial, changes.token != since {
            // The history was rewritten: tell every subscriber to reload, even when no
            // record is listed (everything may have been deleted).
            notifications = [RemoteNotification(
                databaseIdentifier: context.identifier, zone: zone, recordIDs: [], reason: .deleted,
                token: changes.token)]
        }
        for notification in notifications {
            for handler in handlers { handler(notification) }
        }
    }
}
