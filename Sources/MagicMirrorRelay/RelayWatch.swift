import Foundation
import MagicMirror
import Synchronization

/// The subscriptions of one ``RelayDatabase`` and the stream that feeds them.
///
/// State, behind one mutex (never held while calling a handler or awaiting):
/// - `handlers`: per zone, the live subscriptions' handlers;
/// - `delivered`: per zone, the latest token this instance read, wrote or delivered; a
///   hint at or before it is dropped, and the relay is told it so that a new stream starts
///   there. A hint of this instance's own commit (its writer is ours) is dropped too: it
///   was delivered when committed;
/// - `task`: the watching task, running while any subscription lives;
/// - `reader`: the answer being read, cancelled to open another at once (a zone was added)
///   or to stop (the last subscription went); `zonesChanged`, set when a zone was added
///   since the zones of the stream being opened were read;
/// - `outage`: whether the current failure of the stream was reported.
///
/// The task reads `/v1/stream` with a session id of its own: a line of hints whenever the
/// relay has some, an empty line (the relay's heartbeat) after ``RelayWire/pollSeconds``
/// without, for ``RelayWire/streamSeconds``; then it opens another, naming the tokens it
/// knows. An answer that sends nothing for ``RelayWire/deadLinkSeconds`` is taken for a dead
/// link. A stream that fails (the relay or the link is down, the link is dead) is reported
/// once per outage, as a transient `.mirrorError` notification
/// (``MirrorError/Kind/unavailable``); it is opened again with backoff, and the first one
/// answered brings every zone's changes since its token. The relay forgets a session that
/// reads no stream for ``RelayWire/deadLinkSeconds``.
///
/// A stream costs the relay a write per line where a long poll (`/v1/watch`, which the relay
/// also serves) costs it a request per answer: for an idle client, one request a minute
/// instead of one every five seconds.
final class RelayWatch: Sendable {
    typealias Handler = @Sendable (RemoteNotification) -> Void

    private struct State {
        var handlers: [ZoneID: [Int: Handler]] = [:]
        var delivered: [ZoneID: ChangeToken] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
        var reader: RelayLineReader?
        var zonesChanged = false
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

    /// Adds a subscription; the first starts the watching task. A zone new to the stream
    /// being read has the stream opened again at once, naming it (the relay ends the old
    /// one: the new one takes its session over).
    func add(_ zone: ZoneID, handler: @escaping Handler) -> MirrorCancellable {
        let (id, reopen) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let isNew = state.handlers[zone] == nil
            state.handlers[zone, default: [:]][id] = handler
            if state.task == nil {
                state.task = Task { [weak self] in await self?.watch() }
                return (id, nil as RelayLineReader?)
            }
            if isNew { state.zonesChanged = true }
            return (id, isNew ? state.reader : nil)
        }
        reopen?.cancel(.cancelled)
        return MirrorCancellable { [weak self] in
            let last = self?.state.withLock { state -> RelayLineReader? in
                state.handlers[zone]?[id] = nil
                if state.handlers[zone]?.isEmpty == true { state.handlers[zone] = nil }
                return state.handlers.isEmpty ? state.reader : nil
            }
            // The last subscription gone: the stream ends now, not at its time.
            last?.cancel(.cancelled)
        }
    }

    /// Stops watching: the stream being read ends.
    func stop() {
        let reader = state.withLock { state in
            state.handlers = [:]
            return state.reader
        }
        reader?.cancel(.cancelled)
    }

    private func watch() async {
        var backoff = Duration.milliseconds(100)
        // Without subscriptions the task ends; the next subscription starts another.
        while let zones = watchedZones(endingTask: true) {
            do {
                try await read(zones)
                backoff = .milliseconds(100)
                state.withLock { $0.outage = false }
            } catch {
                report(error)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
    }

    /// Posts a failed stream once per outage, as a transient error.
    private func report(_ error: any Error) {
        let isNew = state.withLock { state in
            defer { state.outage = true }
            return !state.outage
        }
        guard isNew else { return }
        let reason = (error as? MirrorError)?.message ?? String(describing: error)
        var reported = MirrorError(
            .unavailable,
            "lost the stream that hears other writers' changes from \(identifier); opening it again, then pulling every "
                + "subscribed zone (\(reason))")
        reported.underlying = error
        NotificationCenter.default.post(name: .mirrorError, object: reported)
    }

    /// The zones to watch and the tokens known; `nil` without subscriptions (and then, when
    /// `endingTask`, the watching task is marked ended).
    private func watchedZones(endingTask: Bool) -> [RelayWire.ZoneToken]? {
        state.withLock { state -> [RelayWire.ZoneToken]? in
            if state.handlers.isEmpty {
                if endingTask { state.task = nil }
                return nil
            }
            state.zonesChanged = false
            return state.handlers.keys.map { RelayWire.ZoneToken(zone: $0, token: state.delivered[$0] ?? .initial) }
        }
    }

    /// One stream, each line's hints delivered as it comes, until the stream ends or its
    /// reader is cancelled.
    private func read(_ zones: [RelayWire.ZoneToken]) async throws {
        let request = RelayWire.WatchRequest(session: session, zones: zones)
        _ = try await transport.stream("stream", request, silence: .seconds(RelayWire.deadLinkSeconds)) { [weak self] in
            let reader = RelayLineReader { [weak self] line in self?.receive(line) }
            let cancelled = self?.state.withLock { state in
                state.reader = reader
                // A zone added, or the last subscription gone, since the zones were read.
                return state.zonesChanged || state.handlers.isEmpty
            } ?? true
            if cancelled { reader.cancel(.cancelled) }
            return reader
        }
    }

    /// A line of the stream: its hints, delivered.
    private func receive(_ line: Data) {
        guard let hints = try? JSONDecoder().decode(RelayWire.Hints.self, from: line) else {
            state.withLock { $0.reader }?.cancel(.malformed)
            return
        }
        deliver(hints.hints)
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
