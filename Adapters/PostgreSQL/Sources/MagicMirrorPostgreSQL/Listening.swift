import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// The subscriptions of one ``PostgreSQLDatabase``, fed by the listening connection of its
/// ``ServerLink`` (``SharedListener``), and the task that pulls for them.
///
/// State, all behind one mutex (never held while calling a handler or awaiting):
/// - `entries`: per subscribed zone, its handlers, its notification key once known,
///   `delivered`, the token up to which its handlers heard of every change, `due` (a
///   notification may concern it) and `quietUntil` (see below);
/// - `known`: the latest token this instance read or wrote per zone, where a new
///   subscription starts (changes after it are delivered);
/// - `task` and `wake`: the pulling task, started by the first subscription, and how to
///   wake it; `joined`: whether this instance is a member of the shared listener;
/// - `needsHeal`: every subscribed zone must be pulled (the listening connection is new);
/// - `outage`: whether the current loss of the connection was reported;
/// - `quietInterval`, and the counts `received` and `pulls` (for tests and diagnostics).
///
/// Each time the shared listener (re)connects it calls ``connected()``, and the pulling task
/// pulls every subscribed zone since `delivered`, so a change committed while it was away is
/// delivered then. Afterwards a notification makes a zone due when its tag is the zone's and
/// its sequence is past `delivered` (or when the zone's key is not known yet), and the task
/// pulls the due zones, one at a time: notifications that arrive meanwhile only mark zones
/// due again, so many cost one pull. A pull that finds nothing new makes its zone quiet for
/// `quietInterval`: notifications without news (spoofed by any role that may `NOTIFY`, or
/// duplicates) cost at most one pull per zone per interval, and a real change after them is
/// pulled when the interval ends. A zone whose notifications' changes were read by the pull
/// under way when they came (commits in quick succession) is not pulled again for them, so
/// that it is not made quiet by its own news. A commit made through this instance is delivered by
/// ``deliverOwnCommit(_:in:after:token:)`` before `commit` returns; its notification's
/// sequence is then not past `delivered`.
final class Listening: Sendable {
    typealias Handler = @Sendable (RemoteNotification) -> Void

    /// What the listening task needs of its database, without holding the database.
    struct Context: Sendable {
        let link: ServerLink
        let logger: Logger
        let identifier: String
        let writer: String
    }

    private struct Entry {
        var notifyKey: String?
        var delivered: ChangeToken
        var handlers: [Int: Handler] = [:]
        var due = false
        /// Whether a notification with this zone's tag made it due (not only one that any
        /// zone whose key was unknown then may have been concerned by).
        var dueByTag = false
        /// The greatest sequence of the notifications with this zone's tag that made it due
        /// since its last pull began: a zone whose handlers heard of it by the time its pull
        /// would start (the pull under way when the notifications came read their changes) is
        /// not pulled.
        var dueSequence = 0
        var quietUntil: ContinuousClock.Instant?

        /// No longer due: pulled now, or heard of already.
        mutating func settle() {
            due = false
            dueByTag = false
            dueSequence = 0
        }
    }

    private struct State {
        var entries: [ZoneID: Entry] = [:]
        var known: [ZoneID: ChangeToken] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
        var wake: AsyncStream<Void>.Continuation?
        var joined = false
        var needsHeal = false
        var stopped = false
        var outage = false
        var quietInterval = Listening.quietInterval
        var received = 0
        var pulls = 0
    }

    /// The first wait before reconnecting, doubled after each failure up to ``maximumBackoff``.
    static let initialBackoff = Duration.milliseconds(50)
    /// The longest wait between two attempts to reconnect.
    static let maximumBackoff = Duration.seconds(2)
    /// How long a zone whose last pull found nothing new is not pulled again for a
    /// notification.
    static let quietInterval = Duration.milliseconds(250)

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
                state.entries[zone] = Entry(notifyKey: nil, delivered: state.known[zone] ?? .initial)
            }
            state.entries[zone]?.handlers[id] = handler
            if state.task == nil {
                let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                state.wake = wake
                state.task = Task { [weak self] in await self?.pullWhenWoken(wakeups, wake: wake) }
            }
            return id
        }
        guard let id else { return MirrorCancellable {} }
        let joins = state.withLock { state in
            defer { state.joined = true }
            return !state.joined && !state.stopped
        }
        if joins { context.link.listener.register(self, on: context.link) }
        return MirrorCancellable { [weak self] in
            self?.state.withLock { state in
                state.entries[zone]?.handlers[id] = nil
                if state.entries[zone]?.handlers.isEmpty == true { state.entries[zone] = nil }
            }
        }
    }

    /// How many notifications the listening task received, and how many pulls it ran.
    var counts: (received: Int, pulls: Int) {
        state.withLock { ($0.received, $0.pulls) }
    }

    /// Sets how long a zone whose pull found nothing new is not pulled for a notification,
    /// and ends the current quiet intervals.
    func setQuietInterval(_ interval: Duration) {
        state.withLock { state in
            state.quietInterval = interval
            for zone in state.entries.keys { state.entries[zone]?.quietUntil = nil }
        }
    }

    /// Ends the listening task; no handler is called after it.
    func stop() {
        let (task, joined) = state.withLock { state in
            state.stopped = true
            state.entries = [:]
            state.wake?.finish()
            defer { (state.task, state.wake, state.joined) = (nil, nil, false) }
            return (state.task, state.joined)
        }
        task?.cancel()
        if joined { context.link.listener.unregister(self) }
    }

    // MARK: - Events of the shared listener

    /// The listening connection listens (again): pull every subscribed zone, and report the
    /// next loss anew.
    func connected() {
        let wake = state.withLock { state in
            state.outage = false
            state.needsHeal = true
            return state.wake
        }
        wake?.yield()
    }

    /// The listening connection was lost (or could not be made): report it, once per outage.
    func lost(_ error: MirrorError) {
        report(error)
    }

    /// A notification arrived (`nil`: one that is not a payload of this package): mark the
    /// zones it may concern due, and wake the pulling task.
    func received(_ matcher: NotificationPayload.Matcher?) {
        guard received(matching: matcher) else { return }
        state.withLock { $0.wake }?.yield()
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

    /// Pulls what is needed each time `wakeups` yields, until cancelled: every subscribed
    /// zone after the listening connection (re)connected, then the due zones, one at a
    /// time. A pull that fails is reported and tried again after a backoff.
    private func pullWhenWoken(_ wakeups: AsyncStream<Void>, wake: AsyncStream<Void>.Continuation) async {
        var timer: (task: Task<Void, Never>, deadline: ContinuousClock.Instant)?
        defer { timer?.task.cancel() }
        var backoff = Self.initialBackoff
        for await _ in wakeups {
            if Task.isCancelled { return }
            if let deadline = timer?.deadline, deadline <= ContinuousClock.now { timer = nil }
            var healing = false
            var pulling: ZoneID?
            do {
                healing = state.withLock { state in
                    defer { state.needsHeal = false }
                    return state.needsHeal
                }
                // Heal: whatever was committed while not listening.
                if healing {
                    for zone in subscribedZones() { try await pull(zone) }
                    healing = false
                }
                while let (zone, byTag) = nextDueZone(at: ContinuousClock.now) {
                    pulling = zone
                    try await pull(zone, quietWhenEmpty: true, dueByTag: byTag)
                    pulling = nil
                }
                backoff = Self.initialBackoff
            } catch {
                if Task.isCancelled { return }
                state.withLock { state in
                    if healing { state.needsHeal = true }
                    if let pulling { state.entries[pulling]?.due = true }
                }
                report(error)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, Self.maximumBackoff)
                wake.yield()
                continue
            }
            // A quiet zone that is due: wake up when its interval ends.
            if let deadline = earliestQuietDue(), timer.map({ deadline < $0.deadline }) ?? true {
                timer?.task.cancel()
                timer = (Task {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    if !Task.isCancelled { wake.yield() }
                }, deadline)
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

    /// Marks the zones a notification may concern as due: those whose key makes its tag and
    /// whose handlers did not hear of its sequence yet, and those whose key is not known
    /// yet (their first pull learns it). Returns whether it marked one.
    private func received(matching matcher: NotificationPayload.Matcher?) -> Bool {
        let keys = state.withLock { state -> [(ZoneID, String?)] in
            state.received += 1
            guard let matcher else { return [] }
            // Only the zones the notification can still concern: no copy of every entry per
            // notification, whatever floods the channel.
            return state.entries.compactMap { zone, entry in
                entry.notifyKey == nil || matcher.payload.sequence > entry.delivered.sequence ? (zone, entry.notifyKey) : nil
            }
        }
        // Digests outside the lock.
        let concerned = keys.compactMap { zone, key -> (ZoneID, byTag: Bool)? in
            guard let key else { return (zone, false) }
            return matcher?.isOfZone(withKey: key) == true ? (zone, true) : nil
        }
        guard !concerned.isEmpty else { return false }
        state.withLock { state in
            for (zone, byTag) in concerned {
                state.entries[zone]?.due = true
                if byTag, let sequence = matcher?.payload.sequence {
                    state.entries[zone]?.dueByTag = true
                    let before = state.entries[zone]?.dueSequence ?? 0
                    state.entries[zone]?.dueSequence = max(before, sequence)
                }
            }
        }
        return true
    }

    /// A due zone that is not quiet at `now`, no longer due: the next to pull. A zone made
    /// due only by notifications of its own (by tag) whose changes its handlers heard since
    /// (the pull under way when they came read them) is no longer due, and not pulled: such
    /// a pull would find nothing new and make the zone quiet, so that under a steady stream
    /// of commits the next change would wait for the quiet interval.
    private func nextDueZone(at now: ContinuousClock.Instant) -> (ZoneID, byTag: Bool)? {
        state.withLock { state in
            let heard = state.entries.compactMap { zone, entry in
                entry.due && entry.dueByTag && entry.notifyKey != nil && entry.dueSequence <= entry.delivered.sequence
                    ? zone : nil
            }
            for zone in heard { state.entries[zone]?.settle() }
            guard let zone = state.entries.first(where: { _, entry in
                entry.due && (entry.quietUntil.map { $0 <= now } ?? true)
            })?.key else { return nil }
            let byTag = state.entries[zone]?.dueByTag ?? false
            state.entries[zone]?.settle()
            return (zone, byTag)
        }
    }


    /// When the first due zone's quiet interval ends.
    private func earliestQuietDue() -> ContinuousClock.Instant? {
        state.withLock { state in
            state.entries.values.filter(\.due).compactMap(\.quietUntil).min()
        }
    }

    /// Reads a zone's changes since what its handlers heard and delivers them; with
    /// `quietWhenEmpty` (a pull for a notification), a pull that finds nothing new makes the
    /// zone quiet.
    private func pull(_ zone: ZoneID, quietWhenEmpty: Bool = false, dueByTag: Bool = false) async throws {
        guard let since = state.withLock({ state in
            state.pulls += 1
            return state.entries[zone]?.delivered
        }) else { return }
        let (changes, notifyKey) = try await PostgreSQLReads.changes(
            in: zone, since: since, link: context.link, logger: context.logger)
        let handlers = state.withLock { state -> [Handler] in
            guard var entry = state.entries[zone] else { return [] }
            entry.notifyKey = notifyKey ?? entry.notifyKey
            // Nothing new: notifications of this zone wait for the quiet interval, when one
            // with its tag asked for the pull, or when its key is still unknown (every
            // notification concerns it). A zone made due while its key was unknown and
            // known by now (a pull since learned it) is not made quiet: that notification
            // may have been another zone's, and a real change of this one may come next.
            let toldApart = entry.notifyKey != nil && !dueByTag
            entry.quietUntil = quietWhenEmpty && !toldApart && changes.token == since && changes.records.isEmpty
                ? ContinuousClock.now + state.quietInterval : nil
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
