import Logging
@_spi(DatabaseImplementation) import MagicMirror
import PostgresNIO
import Synchronization

/// The one connection in `LISTEN magicmirror` of a ``ServerLink``, shared by the
/// ``Listening`` of every database on the link, and the task that keeps it alive.
///
/// State, behind one mutex (never held while awaiting or calling a member):
/// - `members`: the subscriptions to tell, by identity;
/// - `task`: the listening task, started by the first member, ended with the last;
/// - `connection`: the connection while it listens (a member that joins then is told at
///   once, and pulls).
///
/// The connection is a dedicated one (``ServerLink/connect(applicationName:)``, named
/// `magicmirror-listen` in `pg_stat_activity`), with TCP keepalive on its socket. A leased
/// connection that listens is never checked by the pool, and a connection the server forgot
/// (a restart during a network cut, a backend that hangs) looks established for ever; so
/// every ``checkInterval`` the task runs `SELECT 1` on it, which must answer within
/// ``checkDeadline`` (or bring notifications meanwhile: an answer queued behind many is
/// late, not lost). When it does not, or the connection fails, the task closes it, tells
/// every member it was lost (each reports the outage once), and connects again with
/// backoff; once listening again it tells every member, and each pulls its zones since its
/// tokens.
///
/// While it listens, the connection also serves the link's work
/// (``withListeningConnection(wait:_:)``): whenever it is free, and, when the server refuses
/// the pool a connection, after the work before. A process that is not busy then holds this
/// one connection only (its pool's close when idle), and as many processes as the server has
/// connections for can work.
final class SharedListener: Sendable {
    /// How often the listening connection is checked.
    static let checkInterval = Duration.seconds(2)
    /// How long the check may wait for its answer: a dead connection is noticed within
    /// ``checkInterval`` + ``checkDeadline``.
    static let checkDeadline = Duration.seconds(4)
    /// How long the check may wait for its answer while work runs on the connection (see
    /// ``withListeningConnection(wait:_:)``), whose answer it waits behind: work that takes
    /// longer without a word from the server fails with the connection, and is retried.
    static let lentCheckDeadline = Duration.seconds(8)
    /// The name of the listening connection in `pg_stat_activity.application_name`.
    static let applicationName = "magicmirror-listen"

    private struct State {
        var members: [ObjectIdentifier: Listening] = [:]
        var task: Task<Void, Never>?
        /// The connection while it listens.
        var connection: PostgresConnection?
    }

    private let state = Mutex(State())
    /// One use of the connection at a time (see ``withListeningConnection(_:)``).
    private let gate = AsyncGate()
    /// Uses of the connection under way: its check waits for them rather than closing it.
    private let lent = Atomic<Int>(0)

    /// Whether the connection listens now.
    var isListening: Bool { state.withLock { $0.connection != nil } }

    /// When the last notification arrived: while they arrive, an answer on this connection
    /// would wait behind every notification read before it (a flood of `NOTIFY`s, which any
    /// role may send, would stall the work lent to it), so work goes to the pool.
    private let lastNotification = Mutex<ContinuousClock.Instant?>(nil)
    /// How long after a notification the connection is not lent without waiting (200 ms;
    /// tests set it).
    let busyInterval = Mutex(Duration.milliseconds(200))

    /// Runs `body` on the listening connection, one body at a time, when it listens now;
    /// returns `nil` at once when it does not, or, unless `wait`, when another body runs or
    /// a notification arrived within ``busyInterval``.
    ///
    /// A transaction on this connection delays its notifications until it ends (the server
    /// sends none inside a transaction); the connection's check waits ``lentCheckDeadline``
    /// for its answer while a body runs.
    func withListeningConnection<Result: Sendable>(
        wait: Bool, _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result? {
        guard isListening else { return nil }
        if !wait, let last = lastNotification.withLock({ $0 }), ContinuousClock.now - last < busyInterval.withLock({ $0 }) {
            return nil
        }
        if wait {
            await gate.acquire()
        } else if !gate.tryAcquire() {
            return nil
        }
        defer { gate.release() }
        guard let connection = state.withLock({ $0.connection }) else { return nil }
        lent.add(1, ordering: .relaxed)
        defer { lent.subtract(1, ordering: .relaxed) }
        return try await body(connection)
    }

    /// Adds `member`; starts listening on `link` with the first.
    func register(_ member: Listening, on link: ServerLink) {
        let connected = state.withLock { state -> Bool in
            state.members[ObjectIdentifier(member)] = member
            if state.task == nil {
                state.task = Task { await self.listen(on: link) }
            }
            return state.connection != nil
        }
        if connected { member.connected() }
    }

    /// Removes `member`; the last one ends the listening connection.
    func unregister(_ member: Listening) {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.members[ObjectIdentifier(member)] = nil
            guard state.members.isEmpty else { return nil }
            state.connection = nil
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    /// Ends listening whatever the members.
    func stop() {
        let task = state.withLock { state in
            state.members = [:]
            state.connection = nil
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    private var members: [Listening] { state.withLock { Array($0.members.values) } }

    private func listen(on link: ServerLink) async {
        var backoff = Listening.initialBackoff
        while !Task.isCancelled {
            do {
                let connection: PostgresConnection
                do {
                    connection = try await link.connect(applicationName: Self.applicationName)
                } catch {
                    throw PostgreSQLErrors.connectionRefusal(error, to: link)
                }
                do {
                    try await listen(on: connection, logger: link.logger)
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
                throw MirrorError(.unavailable, "the server ended the notification connection")
            } catch {
                let wasListening = state.withLock { state in
                    defer { state.connection = nil }
                    return state.connection != nil
                }
                if wasListening { backoff = Listening.initialBackoff }
                if Task.isCancelled { return }
                let reported = PostgreSQLErrors.mirrorError(error, "listening for notifications")
                for member in members { member.lost(reported) }
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, Listening.maximumBackoff)
            }
        }
    }

    /// Listens on `connection` until it fails or its check goes unanswered.
    private func listen(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.listen(on: NotificationPayload.channel) { notifications in
            let joined = state.withLock { state -> [Listening] in
                state.connection = connection
                return Array(state.members.values)
            }
            for member in joined { member.connected() }
            // The check's failure says why the connection was closed: it wins over the
            // notifications' end that the closing causes.
            let checkFailure = CheckFailure()
            let traffic = Traffic()
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        do {
                            try await Self.check(connection, traffic: traffic, isLent: { self.lent.load(ordering: .relaxed) > 0 }, logger: logger)
                        } catch {
                            checkFailure.error.withLock { $0 = error }
                            throw error
                        }
                    }
                    group.addTask {
                        for try await notification in notifications {
                            traffic.heard()
                            self.lastNotification.withLock { $0 = .now }
                            // Parsed once, and each key's digest made once, for every member.
                            let matcher = NotificationPayload(notification.payload).map(NotificationPayload.Matcher.init)
                            for member in self.members { member.received(matcher) }
                        }
                        throw MirrorError(.unavailable, "the server ended the notification connection")
                    }
                    defer { group.cancelAll() }
                    try await group.next()
                }
            } catch {
                throw checkFailure.error.withLock { $0 } ?? error
            }
        }
    }

    /// Runs `SELECT 1` every ``checkInterval`` until one fails, or goes unanswered for
    /// ``checkDeadline`` while nothing else arrives either (an answer queued behind a flood
    /// of notifications is late, but the server is there), or for ``lentCheckDeadline`` while
    /// work runs on the connection (the check's answer waits behind it); then closes the
    /// connection (which ends its notifications and fails that work) and throws.
    private static func check(
        _ connection: PostgresConnection, traffic: Traffic, isLent: @Sendable () -> Bool, logger: Logger
    ) async throws {
        while true {
            try await Task.sleep(for: checkInterval)
            let answer = Task {
                for try await _ in try await connection.query("SELECT 1", logger: logger) {}
            }
            defer { answer.cancel() }
            let asked = ContinuousClock.now
            while true {
                do {
                    try await withDeadline(checkDeadline, "checking the listening connection") {
                        try await answer.value
                    }
                    break
                } catch {
                    if Task.isCancelled { throw CancellationError() }
                    if let error = error as? MirrorError, error.kind == .timedOut,
                       traffic.heard(within: checkDeadline)
                        || (isLent() && ContinuousClock.now - asked < lentCheckDeadline) {
                        continue
                    }
                    try? await connection.close()
                    throw error
                }
            }
        }
    }
}

/// Why the check of the listening connection failed, once it did.
private final class CheckFailure: Sendable {
    let error = Mutex<(any Error)?>(nil)
}

/// When the listening connection last brought a notification.
private final class Traffic: Sendable {
    private let last = Mutex(ContinuousClock.now)
    func heard() { last.withLock { $0 = .now } }
    func heard(within interval: Duration) -> Bool { last.withLock { ContinuousClock.now - $0 < interval } }
}
