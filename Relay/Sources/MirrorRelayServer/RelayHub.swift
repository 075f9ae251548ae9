import Foundation
import HTTPTypes
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import Synchronization

/// The relay's fan-out (its streams: `RelayHub+Streams.swift`; the state is the hub's own,
/// internal only so that the two files share it): one subscription per user and private or shared zone on that
/// user's database, and one per public zone on the database of the first user who watched
/// it (all fed by the process's one listening connection), and per client connection (a
/// session of `/v1/watch` long polls) a bounded queue of hints.
///
/// State, behind one mutex (never held while subscribing, reading or awaiting):
/// - `sessions`: per user and session id, the zones watched, the queue (``HintQueue``: at
///   most one hint per zone and reason), the waiting poll's wake-up, and when the session
///   last polled;
/// - `watches`: per user and zone (per zone for a public zone), the subscription and the
///   sessions that watch it;
/// - `bySubject`: the sessions of each user (an index of `sessions`);
/// - `streams` and `writing`: the streams being written, per user and by number.
///
/// A poll waits on its session's `wake`. A stream's lines are written by the hub itself on
/// the stream's connection (``StreamOutlet``): a hint queued for a streaming session
/// schedules one write of its queue on the connection's event loop, where every stream of
/// that loop with something to write is written in one job (``flush(_:now:)``).
///
/// A session that has not polled for `RelayWire.deadLinkSeconds` is forgotten by
/// ``sweep()``, and a subscription no session watches is cancelled. Memory is bounded by
/// the sessions' zones (at most `RelayWire.maximumWatchedZones` each) times three reasons.
final class RelayHub: Sendable {
    struct SessionKey: Hashable { let subject: String; let id: String }
    /// A subscription's key: the user and the zone, or the zone alone for a public zone,
    /// whose records every user reads alike (one pull per commit for every user watching it,
    /// not one per user).
    struct WatchKey: Hashable {
        let subject: String
        let zone: ZoneID

        init(subject: String, zone: ZoneID) {
            self.subject = zone.scope == .public ? "" : subject
            self.zone = zone
        }
    }

    struct Session {
        var zones: Set<ZoneID> = []
        var queue = HintQueue()
        var wake: AsyncStream<Void>.Continuation?
        var lastSeen = ContinuousClock.now
        /// Polls of the session still registering zones: such a session is never swept.
        var registering = 0
        /// Whether a stream serves the session (its `wake` ends the stream).
        var streaming = false
        /// Where the stream writes, once its answer's head is written (``started(_:outlet:)``)
        /// until it stops (``stop(_:)``).
        var outlet: StreamOutlet?
        /// Whether a write of the queue is scheduled on the outlet's loop: a burst of hints
        /// schedules one.
        var flushing = false
        /// Who set `wake`: a poll's or a stream's number (``State/nextWaiter``), so that a
        /// poll or stream that another took the session from touches nothing of it.
        var waiter: UInt64 = 0
        /// When the session's stream ends.
        var streamEnds = ContinuousClock.Instant.now
        /// How many zones the session's last poll named: what counts against its user's
        /// limit, from the moment the poll is accepted (its zones are subscribed one by
        /// one after that, so polls sent at once could each pass a count of subscribed zones).
        var requested = 0
        /// Per zone, the latest token of a hint queued for the session: a poll naming an
        /// older one did not get that hint (its answer was lost on the way), and gets it again.
        var latest: [ZoneID: ChangeToken] = [:]

        /// Ends the poll or stream that waits: nothing more is written to a stream.
        mutating func endStream() {
            wake?.finish()
            (wake, streaming, outlet, flushing) = (nil, false, nil, false)
        }
    }

    struct Watch {
        var sessions: Set<SessionKey>
        let subscription: MirrorCancellable
    }

    struct State {
        var sessions: [SessionKey: Session] = [:]
        var watches: [WatchKey: Watch] = [:]
        /// The keys of `sessions`, by user: a poll checks its user's limits without going
        /// through every session of every user (with thousands of clients that walk, under
        /// this mutex, was most of the relay's work).
        var bySubject: [String: Set<SessionKey>] = [:]
        /// The number the next poll or stream waits under.
        var nextWaiter: UInt64 = 1
        /// Per user, the streams whose answers are being written (a stream whose client
        /// stopped reading stays here, its session swept, until its write fails).
        var streams: [String: Int] = [:]
        /// The streams being written, by their number: when each should have ended, and how
        /// to close its connection (a write its client never takes ends only so).
        var writing: [UInt64: (ends: ContinuousClock.Instant, abort: @Sendable () -> Void)] = [:]
    }

    let state = Mutex(State())
    /// The line last written, which the streams of the same zone write next.
    let lines = StreamLines()

    /// The most sessions, and zones over all its sessions, one subject may watch at once.
    static let maximumSessionsPerSubject = 16
    static let maximumZonesPerSubject = 1_024

    /// The number of sessions and subscriptions, for tests and logs.
    var counts: (sessions: Int, watches: Int) { state.withLock { ($0.sessions.count, $0.watches.count) } }

    /// One long poll: registers the session's zones, queues what changed since the tokens
    /// the client gave for zones new to the session, then waits up to `RelayWire.pollSeconds`
    /// for a hint and returns the queue.
    ///
    /// - Throws: A ``RelayFailure`` for a malformed request; a `MirrorError` from reading.
    func poll(
        _ request: RelayWire.WatchRequest, subject: String, database: PostgreSQLDatabase
    ) async throws -> [RemoteNotification] {
        let key = try await open(request, subject: subject, database: database, registering: true)
        defer { state.withLock { state in state.sessions[key]?.registering -= 1 } }
        return await next(key) ?? []
    }

    /// How many hints wait in the session's queue (for tests).
    func queued(subject: String, session: String) -> Int {
        state.withLock { $0.sessions[SessionKey(subject: subject, id: session)]?.queue.count ?? 0 }
    }

    /// Whether a long poll of the session waits now (for tests).
    func isPolling(subject: String, session: String) -> Bool {
        state.withLock { state in
            state.sessions[SessionKey(subject: subject, id: session)].map { $0.wake != nil && !$0.streaming } ?? false
        }
    }

    /// Checks the request, registers the session's zones and queues what the client missed.
    /// With `registering`, the session stays registering (never swept) until the caller
    /// takes one off.
    func open(
        _ request: RelayWire.WatchRequest, subject: String, database: PostgreSQLDatabase, registering: Bool
    ) async throws -> SessionKey {
        guard (1...64).contains(request.session.utf8.count) else {
            throw RelayFailure.badRequest("a watch's session id is 1 to 64 bytes")
        }
        guard request.zones.count <= RelayWire.maximumWatchedZones,
            Set(request.zones.map(\.zone)).count == request.zones.count
        else {
            throw RelayFailure.badRequest("a watch names at most \(RelayWire.maximumWatchedZones) distinct zones")
        }
        for watched in request.zones { try watched.zone.validate() }
        let key = SessionKey(subject: subject, id: request.session)
        let added = try register(key, zones: request.zones)
        do {
            try await register(added, key: key, subject: subject, database: database)
        } catch {
            state.withLock { state in state.sessions[key]?.registering -= 1 }
            throw error
        }
        resendLost(key, zones: request.zones, except: Set(added.map(\.zone)), identifier: database.identifier)
        if !registering { state.withLock { state in state.sessions[key]?.registering -= 1 } }
        return key
    }

    /// Waits until the session's queue holds a hint, or `RelayWire.pollSeconds`, and drains
    /// it; `nil` when the session is gone.
    private func next(_ key: SessionKey) async -> [RemoteNotification]? {
        let (stream, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let turn = state.withLock { state -> (waiter: UInt64, waiting: Bool)? in
            guard var session = state.sessions[key] else { return nil }
            let waiter = state.nextWaiter
            state.nextWaiter += 1
            // A poll takes the session over from another poll or a stream of it.
            session.endStream()
            session.waiter = waiter
            let waiting = session.queue.isEmpty
            session.wake = waiting ? wake : nil
            state.sessions[key] = session
            return (waiter, waiting)
        }
        guard let (waiter, waiting) = turn else { return nil }
        if waiting {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in stream { return } }
                group.addTask { try? await Task.sleep(for: .seconds(RelayWire.pollSeconds)) }
                await group.next()
                group.cancelAll()
            }
        }
        return state.withLock { state in
            // Taken over meanwhile by another poll or a stream, which answers the hints.
            guard var session = state.sessions[key], session.waiter == waiter else { return [] }
            let hints = session.queue.drain()
            session.wake = nil
            session.lastSeen = .now
            state.sessions[key] = session
            return hints
        }
    }

    /// Queues again a hint of each zone the session already watched whose token the client
    /// says it does not have: an answer that carried it was lost (the link died, or the
    /// client gave up waiting). A hint is a token and no records: the client pulls since its
    /// own.
    private func resendLost(_ key: SessionKey, zones: [RelayWire.ZoneToken], except added: Set<ZoneID>, identifier: String) {
        state.withLock { state in
            for watched in zones where !added.contains(watched.zone) {
                guard let latest = state.sessions[key]?.latest[watched.zone],
                      latest.generation != watched.token.generation || watched.token < latest,
                      state.sessions[key]?.queue.holds(watched.zone) == false
                else { continue }
                // In place: no copy of the queue.
                state.sessions[key]?.queue.add(RemoteNotification(
                    databaseIdentifier: identifier, zone: watched.zone, recordIDs: [], reason: .updated, token: latest))
            }
        }
    }

    /// Subscribes the session to the zones new to it and queues what changed since their
    /// tokens. Stops when the client has gone (the task is cancelled).
    private func register(
        _ added: [RelayWire.ZoneToken], key: SessionKey, subject: String, database: PostgreSQLDatabase
    ) async throws {
        let acting = PostgreSQLActingUser(role: subject)
        for watched in added {
            try Task.checkCancellation()
            try subscribe(subject: subject, zone: watched.zone, session: key, database: database, acting: acting)
            // What changed before the subscription: the client pulls since its token.
            let changes = try await PostgreSQLActingUser.$current.withValue(acting) {
                try await database.changes(in: watched.zone, since: watched.token)
            }
            if changes.token != watched.token {
                // Named when one writer made every change: a client drops the hints of its own
                // commits, which it delivered when it committed (its commit may return after
                // this read saw it).
                let writers = Set(changes.records.map(\.writer))
                for hint in RelayWire.notifications(
                    changes.records, zone: watched.zone, token: changes.token, writer: writers.count == 1 ? writers.first : nil,
                    identifier: database.identifier)
                { enqueue(hint, for: [key]) }
            }
        }
    }

    /// Sets the session's zones; returns those new to it. Zones it no longer names lose
    /// their queued hints and, when no other session watches them, their subscription.
    /// The session counts as registering (not sweepable) until the caller's `defer`.
    ///
    /// - Throws: ``RelayFailure`` 429 when the subject would watch more sessions or zones
    ///   than allowed.
    private func register(_ key: SessionKey, zones: [RelayWire.ZoneToken]) throws -> [RelayWire.ZoneToken] {
        let dropped = try state.withLock { state -> [MirrorCancellable] in
            let others = (state.bySubject[key.subject] ?? []).subtracting([key])
            guard state.sessions[key] != nil || others.count < Self.maximumSessionsPerSubject else {
                throw RelayFailure(
                    .tooManyRequests, "tooManyRequests",
                    "a user watches through at most \(Self.maximumSessionsPerSubject) sessions at once")
            }
            guard others.reduce(zones.count, { $0 + (state.sessions[$1]?.requested ?? 0) }) <= Self.maximumZonesPerSubject
            else {
                throw RelayFailure(
                    .tooManyRequests, "tooManyRequests",
                    "a user watches at most \(Self.maximumZonesPerSubject) zones over all sessions")
            }
            var session = state.sessions[key] ?? Session()
            state.bySubject[key.subject, default: []].insert(key)
            session.registering += 1
            session.requested = zones.count
            let wanted = Set(zones.map(\.zone))
            let gone = session.zones.subtracting(wanted)
            session.zones = session.zones.intersection(wanted)
            session.queue.remove(zones: gone)
            for zone in gone { session.latest[zone] = nil }
            session.lastSeen = .now
            state.sessions[key] = session
            return gone.compactMap { leave(&state, key, zone: $0) }
        }
        for subscription in dropped { subscription.cancel() }
        return state.withLock { state in zones.filter { !(state.sessions[key]?.zones.contains($0.zone) ?? false) } }
    }

    /// Removes the session from the zone's watch; returns the subscription to cancel when
    /// none is left.
    private func leave(_ state: inout State, _ key: SessionKey, zone: ZoneID) -> MirrorCancellable? {
        let watchKey = WatchKey(subject: key.subject, zone: zone)
        state.watches[watchKey]?.sessions.remove(key)
        guard let watch = state.watches[watchKey], watch.sessions.isEmpty else { return nil }
        state.watches[watchKey] = nil
        return watch.subscription
    }

    private func subscribe(
        subject: String, zone: ZoneID, session: SessionKey, database: PostgreSQLDatabase, acting: PostgreSQLActingUser
    ) throws {
        let watchKey = WatchKey(subject: subject, zone: zone)
        let joined = try state.withLock { state -> Bool in
            guard state.sessions[session] != nil else { throw CancellationError() }
            state.sessions[session]?.zones.insert(zone)
            guard state.watches[watchKey] != nil else { return false }
            state.watches[watchKey]?.sessions.insert(session)
            return true
        }
        if joined { return }
        // The user's pulls run as the user: the database's listening task starts here.
        // A commit through this relay is delivered by the database inside the commit, under
        // the database's writer id: name the client's instead, which the committing task
        // carries, so that the client knows its own commit.
        let relayWriter = database.writerID
        let subscription = try PostgreSQLActingUser.$current.withValue(acting) {
            try database.subscribe(to: zone) { [weak self] notification in
                var notification = notification
                if notification.writer == relayWriter { notification.writer = PostgreSQLActingUser.current?.writerID }
                self?.fanOut(notification, watch: watchKey)
            }
        }
        let extra = state.withLock { state -> MirrorCancellable? in
            // The session went meanwhile: nobody is left to hear this zone.
            guard state.sessions[session] != nil else { return state.watches[watchKey] == nil ? subscription : nil }
            if state.watches[watchKey] != nil {
                state.watches[watchKey]?.sessions.insert(session)
                return subscription
            }
            state.watches[watchKey] = Watch(sessions: [session], subscription: subscription)
            return nil
        }
        extra?.cancel()
    }

    private func fanOut(_ notification: RemoteNotification, watch: WatchKey) {
        let sessions = state.withLock { $0.watches[watch]?.sessions ?? [] }
        enqueue(notification, for: sessions)
    }

    private func enqueue(_ notification: RemoteNotification, for sessions: Set<SessionKey>) {
        let (wakes, flushes) = state.withLock { state in
            var wakes: [AsyncStream<Void>.Continuation] = []
            var flushes: [StreamFlush] = []
            for key in sessions {
                // In place, through the index: no copy of the session or its queue.
                guard let index = state.sessions.index(forKey: key),
                      state.sessions.values[index].zones.contains(notification.zone)
                else { continue }
                state.sessions.values[index].queue.add(notification)
                let latest = state.sessions.values[index].latest[notification.zone]
                if latest.map({ $0.generation != notification.token.generation || $0 < notification.token }) ?? true {
                    state.sessions.values[index].latest[notification.zone] = notification.token
                }
                if let outlet = state.sessions.values[index].outlet {
                    guard !state.sessions.values[index].flushing else { continue }
                    state.sessions.values[index].flushing = true
                    flushes.append(StreamFlush(key: key, waiter: state.sessions.values[index].waiter, outlet: outlet))
                } else if !state.sessions.values[index].streaming, let wake = state.sessions.values[index].wake {
                    wakes.append(wake)
                }
            }
            return (wakes, flushes)
        }
        for wake in wakes { wake.yield() }
        schedule(flushes)
    }

    /// Forgets the sessions that have not polled for `RelayWire.deadLinkSeconds` and are not
    /// polling, and the subscriptions left without a session.
    func sweep(now: ContinuousClock.Instant = .now) {
        let dropped = state.withLock { state -> [MirrorCancellable] in
            // A poll's session has a wake while it waits (at most RelayWire.pollSeconds); a
            // stream's, for the stream's life, and drains at least every pollSeconds.
            let dead = state.sessions.filter {
                ($0.value.wake == nil || $0.value.streaming) && $0.value.registering == 0
                    && now - $0.value.lastSeen > .seconds(RelayWire.deadLinkSeconds)
            }
            var dropped: [MirrorCancellable] = []
            for (key, session) in dead {
                session.wake?.finish()
                state.sessions[key] = nil
                state.bySubject[key.subject]?.remove(key)
                if state.bySubject[key.subject]?.isEmpty == true { state.bySubject[key.subject] = nil }
                dropped += session.zones.compactMap { leave(&state, key, zone: $0) }
            }
            // Watches left with no live session (none should be): cancelled too.
            for (watchKey, watch) in state.watches {
                let live = watch.sessions.filter { state.sessions[$0] != nil }
                if live.isEmpty {
                    state.watches[watchKey] = nil
                    dropped.append(watch.subscription)
                } else if live.count != watch.sessions.count {
                    state.watches[watchKey]?.sessions = live
                }
            }
            return dropped
        }
        for subscription in dropped { subscription.cancel() }
    }
}
