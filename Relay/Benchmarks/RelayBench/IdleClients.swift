import Foundation
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import Synchronization

/// `idle-clients`: how many clients one relay holds, each with its long poll (`/v1/watch`)
/// open and polling again when answered (the heartbeat, every `RelayWire.pollSeconds`).
///
/// Clients are added in steps. At each step, once every client has connected and been
/// answered with a heartbeat to a poll sent after the last one connected, the bench reads
/// the relay's resident memory and open descriptors. Each user has at most
/// `BenchUsers.maximumSessionsPerUser` sessions (the relay's cap), and each client watches a
/// private zone of its own user that no other client watches.
enum IdleClients {
    static let steps = [500, 1_000, 2_000, 5_000, 10_000]
    static let quickSteps = [200, 500]

    static func run(steps: [Int], streamed: Bool) async throws -> [BenchResult] {
        let limit = BenchCleanup.raiseDescriptorLimit()
        return try await BenchRelay.withFreshRelay { relay, run in
            let idleKiB = relay.residentKiB ?? 0
            let names = BenchUsers.names(run: run, clients: steps.max() ?? 0)
            let tokens = try await BenchUsers.tokens(for: names)
            let board = ClientBoard()
            return try await WatchClients.with(board: board, streamed: streamed) { pool in
                try await ramp(
                    steps: steps, run: run, relay: relay, idleKiB: idleKiB, names: names, tokens: tokens,
                    board: board, pool: pool, descriptorLimit: limit)
            }
        }
    }

    /// Adds clients step by step and measures the relay at each step; stops after a step
    /// whose clients were not all answered.
    private static func ramp(
        steps: [Int], run: String, relay: BenchRelay, idleKiB: Double, names: [String], tokens: [String],
        board: ClientBoard, pool: WatchClients, descriptorLimit: Int
    ) async throws -> [BenchResult] {
        let perUser = BenchUsers.maximumSessionsPerUser
        var results: [BenchResult] = []
        for clients in steps {
            let start = monotonicSeconds()
            board.grow(to: clients)
            let specs = (pool.channels.count..<clients).map { index in
                ClientSpec(
                    index: index, run: run, port: relay.port, tokens: tokens,
                    zone: .private("Bench\(index % perUser)", user: names[index / perUser]))
            }
            var failure = await pool.connect(specs, port: relay.port)
            // Every client answered with a heartbeat to a poll sent after the last one connected
            // (the first polls, which register the zones while the others connect, are timed
            // apart); a poll is late when it took longer than the protocol's dead-link window.
            board.openWindow()
            let deadline = monotonicSeconds() + Double(3 * RelayWire.deadLinkSeconds)
            while failure == nil, !board.settled(clients: clients), monotonicSeconds() < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let seconds = monotonicSeconds() - start
            let window = board.window
            let kib = relay.residentKiB ?? .nan
            let allAnswered = failure == nil && window.answered == clients && window.failures == 0
                && window.longest <= Double(RelayWire.deadLinkSeconds)
            failure = failure ?? window.firstFailure
            if failure == nil, window.answered < clients {
                failure = "\(clients - window.answered) clients had no heartbeat within \(3 * RelayWire.deadLinkSeconds) s"
            }
            if failure == nil, window.longest > Double(RelayWire.deadLinkSeconds) {
                failure = String(
                    format: "a poll took %.1f s, longer than the %ld s dead-link window", window.longest, RelayWire.deadLinkSeconds)
            }
            var note = "\(clients) clients of \((clients + perUser - 1) / perUser) users "
                + "(\(perUser) sessions each), each watching a private zone of its own "
                + (pool.streamed ? "through a stream (/v1/stream); " : "through long polls (/v1/watch); ")
                + String(
                    format: "relay RSS with no client %.1f MiB; polls sent while clients connected answered within %.1f s; "
                        + "descriptor limit %ld; %ld polls were answered 503 (try again) and sent again",
                    idleKiB / 1024, window.rampLongest, descriptorLimit, window.retries)
            if let failure { note += "; " + failure }
            results.append(
                BenchResult(
                    name: "idle-clients", variant: "\(clients) clients", n: clients, seconds: seconds,
                    baseline: "none (absolute figure)",
                    target: clients >= 10_000 ? "≤ 64 KiB per client at 10,000 clients" : nil,
                    meetsTarget: clients >= 10_000 ? allAnswered && (kib - idleKiB) / Double(clients) <= 64 : nil,
                    maxMillis: window.longest * 1000, note: note,
                    clients: clients, kibPerClient: (kib - idleKiB) / Double(clients), relayRSSMiB: kib / 1024,
                    descriptors: relay.descriptors, allAnswered: allAnswered))
            if !allAnswered { break }
        }
        return results
    }
}

/// The clients' answers since the window opened (after the last client of a step
/// connected). Every field is protected by the one mutex; the clients' event loops write it,
/// the bench's task reads it.
final class ClientBoard: WatchBoard {
    struct Window {
        var answered = 0
        var failures = 0
        /// Polls answered 503 and sent again.
        var retries = 0
        /// The longest poll sent and answered in the window, in seconds.
        var longest = 0.0
        /// The longest poll sent before the window opened and answered in it.
        var rampLongest = 0.0
        var firstFailure: String?
    }

    private struct State {
        var heard: [Bool] = []
        var failed: [Bool] = []
        var window = Window()
        var windowStart = 0.0
        var stopping = false
    }

    private let state = Mutex(State())

    var window: Window { state.withLock { $0.window } }

    func grow(to clients: Int) {
        state.withLock { state in
            if state.heard.count < clients {
                state.heard += Array(repeating: false, count: clients - state.heard.count)
                state.failed += Array(repeating: false, count: clients - state.failed.count)
            }
        }
    }

    /// Forgets the heartbeats heard so far.
    func openWindow() {
        state.withLock { state in
            state.heard = Array(repeating: false, count: state.heard.count)
            state.window = Window(
                failures: state.window.failures, retries: state.window.retries, firstFailure: state.window.firstFailure)
            state.windowStart = monotonicSeconds()
        }
    }

    /// Whether each of the first `clients` has had a heartbeat in the window or has failed.
    func settled(clients: Int) -> Bool {
        state.withLock { state in
            state.window.answered + state.failed.prefix(clients).lazy.filter { $0 }.count >= clients
        }
    }

    /// Client `index` was answered: a heartbeat when `hints` is empty.
    func answered(_ index: Int, sentAt: Double, answeredAt: Double, hints: [RemoteNotification]) {
        let (seconds, heartbeat) = (answeredAt - sentAt, hints.isEmpty)
        state.withLock { state in
            guard sentAt >= state.windowStart else {
                state.window.rampLongest = max(state.window.rampLongest, seconds)
                return
            }
            state.window.longest = max(state.window.longest, seconds)
            if heartbeat, !state.heard[index], !state.failed[index] {
                state.heard[index] = true
                state.window.answered += 1
            }
        }
    }

    func failed(_ index: Int, _ reason: String) {
        state.withLock { state in
            guard !state.stopping, !state.failed[index] else { return }
            state.failed[index] = true
            if state.heard[index] {
                state.heard[index] = false
                state.window.answered -= 1
            }
            state.window.failures += 1
            state.window.firstFailure = state.window.firstFailure ?? "client \(index + 1): \(reason)"
        }
    }

    func toldToRetry(_ index: Int) { state.withLock { $0.window.retries += 1 } }

    func stop() { state.withLock { $0.stopping = true } }
}
