import Foundation
import MagicMirror
import Synchronization

/// The subscriptions of one ``RelayDatabase`` and the long poll that feeds them.
///
/// State, behind one mutex (never held while calling a handler or awaiting):
/// - `handlers`: per zone, the live subscriptions' handlers;
/// - `delivered`: per zone, the latest token this instance read, wrote or delivered; a
///   hint at or before it is dropped, and the relay is told it so that a new watch starts
///   there. A hint of this instance's own commit (its writer is ours) is dropped too: it
///   was delivered when committed;
/// - `task`: the polling task, running while any subscription lives (it ends after the
///   request under way when the last one is cancelled: requests are never cancelled);
/// - `outage`: whether the current failure of the poll was reported.
///
/// A poll that fails (the relay or the link is down, or it answered nothing within
/// ``RelayWire/deadLinkSeconds``) is reported once per outage, as a transient
/// `.mirrorError` notification (``MirrorError/Kind/unavailable``); the poll is sent again
/// with backoff, and the first one answered brings every zone's changes since its token.
///
/// The task long-polls `/v1/watch` with a session id of its own: the relay answers within
/// ``RelayWire/pollSeconds`` (its heartbeat), and a request unanswered after
/// ``RelayWire/deadLinkSeconds`` is taken for a dead link and sent again. The relay forgets a
/// session that does not poll for as long.
final class RelayWatch: Sendable {
    typealias Handler = @Sendable (RemoteNotification) -> Void

    private struct State {
        var handlers: [ZoneID: [Int: Handler]] = [:]
        var delivered: [ZoneID: ChangeToken] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
        var outage = false
    }

    private let state = Mutex(State())
    private let transport: RelayTransport
    private let identifier: String
    private let writerID: String
    private let session = UUID().uuidString.lowercased()

    init(transport: RelayTransport, identifier: String, writerID: String) {
        self.transport = transport
        self.identifier = identifier
        self.writerID = writerID
    }

    /// Notes a token this instance read or wrote.
    func note(_ token: ChangeToken, of zone: ZoneID) {
        state.withLock { state in
            if let known = state.delivered[zone], known >= token, known.generation == token.generation { return }
            state.delivered[zone] = token
        }
    }

    /// Delivers this instance's own commit to its subscribers, before the commit returns.
    func deliverOwn(_ outcome: CommitOutcome, in zone: ZoneID, writer: String) {
        let records = outcome.results.compactMap { if case .applied(let record) = $0 { record } else { nil } }
        note(outcome.token, of: zone)
        guard !records.isEmpty else { return }
        let handlers = state.withLock { Array(($0.handlers[zone] ?? [:]).values) }
        for notification in RelayWire.notifications(records, zone: zone, token: outcome.token, writer: writer, identifier: identifier) {
            for handler in handlers { handler(notification) }
        }
    }

    /// Adds a subscription; the first starts the polling task.
    func add(_ zone: ZoneID, handler: @escaping Handler) -> MirrorCancellable {
        let (id, registerNow) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let isNew = state.handlers[zone] == nil
            state.handlers[zone, default: [:]][id] = handler
            if state.task == nil {
                state.task = Task { [weak self] in await self?.poll() }
                return (id, false)
            }
            return (id, isNew)
        }
        if registerNow {
            // A zone new to a running poll is told to the relay at once, not when the poll
            // under way returns: the relay answers that poll and holds this one instead.
            Task { [weak self] in
                guard let self, let zones = self.watchedZones(endingTask: false) else { return }
                try? await self.pollOnce(zones)
            }
        }
        return MirrorCancellable { [weak self] in
            self?.state.withLock { state in
                state.handlers[zone]?[id] = nil
                if state.handlers[zone]?.isEmpty == true { state.handlers[zone] = nil }
            }
        }
    }

    /// Stops polling once the request under way ends.
    func stop() {
        state.withLock { $0.handlers = [:] }
    }

    private func poll() async {
        var backoff = Duration.milliseconds(100)
        // Without subscriptions the task ends; the next subscription starts another.
        while let zones = watchedZones(endingTask: true) {
            do {
                try await pollOnce(zones)
                backoff = .milliseconds(100)
                state.withLock { $0.outage = false }
            } catch {
                report(error)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
    }

    /// Posts a failed poll once per outage, as a transient error.
    private func report(_ error: any Error) {
        let isNew = state.withLock { state in
            defer { state.outage = true }
            return !state.outage
        }
        guard isNew else { return }
        let reason = (error as? MirrorError)?.message ?? String(describing: error)
        var reported = MirrorError(
            .unavailable,
            "lost the long poll that hears other writers' changes from \(identifier); polling again, then pulling every "
                + "subscribed zone (\(reason))")
        reported.underlying = error
        NotificationCenter.default.post(name: .mirrorError, object: reported)
    }

    /// The zones to watch and the tokens known; `nil` without subscriptions (and then, when
    /// `endingTask`, the polling task is marked ended).
    private func watchedZones(endingTask: Bool) -> [RelayWire.ZoneToken]? {
        state.withLock { state -> [RelayWire.ZoneToken]? in
            if state.handlers.isEmpty {
                if endingTask { state.task = nil }
                return nil
            }
            return state.handlers.keys.map { RelayWire.ZoneToken(zone: $0, token: state.delivered[$0] ?? .initial) }
        }
    }

    /// One long poll, its hints delivered.
    private func pollOnce(_ zones: [RelayWire.ZoneToken]) async throws {
        let answer = try await transport.post(
            "watch", RelayWire.WatchRequest(session: session, zones: zones),
            timeout: TimeInterval(RelayWire.deadLinkSeconds), as: RelayWire.Hints.self)
        deliver(answer.hints)
    }

    /// Hints from the relay: each delivered when its token is past what this instance
    /// knew of its zone before this answer.
    private func deliver(_ hints: [RemoteNotification]) {
        let deliveries = state.withLock { state -> [(RemoteNotification, [Handler])] in
            let before = state.delivered
            var deliveries: [(RemoteNotification, [Handler])] = []
            for hint in hints {
                // This instance's own commits were delivered when committed.
                if hint.writer == writerID { continue }
                if let known = before[hint.zone], known.generation == hint.token.generation, known >= hint.token {
                    continue
                }
                let latest = state.delivered[hint.zone]
                if latest.map({ $0.generation != hint.token.generation || $0 < hint.token }) ?? true {
                    state.delivered[hint.zone] = hint.token
                }
                var notification = hint
                notification.databaseIdentifier = identifier
                deliveries.append((notification, Array((state.handlers[hint.zone] ?? [:]).values)))
            }
            return deliveries
        }
        for (notification, handlers) in deliveries {
            for handler in handlers { handler(notification) }
        }
    }
}
