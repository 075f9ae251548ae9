import Foundation
import JWTKit
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// `idle-clients`: how many clients one relay holds, each with its long poll (`/v1/watch`)
/// open and polling again when answered (the heartbeat, every `RelayWire.pollSeconds`).
///
/// Clients are added in steps. At each step, once every client has connected and been
/// answered with a heartbeat to a poll sent after the last one connected, the bench reads
/// the relay's resident memory and open descriptors. Each user has at most
/// `maximumSessionsPerUser` sessions (the relay's cap), and each client watches a private
/// zone of its own user that no other client watches.
enum IdleClients {
    static let steps = [500, 1_000, 2_000, 5_000, 10_000]
    static let quickSteps = [200, 500]
    /// The relay's cap on a user's sessions.
    static let maximumSessionsPerUser = 16
    /// Clients connected at once while ramping up.
    static let connectBatch = 250

    static func run(steps: [Int]) async throws -> [BenchResult] {
        let limit = BenchCleanup.raiseDescriptorLimit()
        let run = "rb" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(8)
        do {
            let results = try await measure(steps: steps, run: run, descriptorLimit: limit)
            await BenchCleanup.shared.run()
            return results
        } catch {
            await BenchCleanup.shared.run()
            throw error
        }
    }

    private static func measure(steps: [Int], run: String, descriptorLimit: Int) async throws -> [BenchResult] {
        try await BenchServer.admin("CREATE DATABASE \(run)")
        BenchCleanup.shared.database = run
        try BenchRelay.setup(database: run)
        let relay = try BenchRelay.start(database: run)
        let idleKiB = relay.residentKiB ?? 0
        let most = steps.max() ?? 0
        let users = (most + maximumSessionsPerUser - 1) / maximumSessionsPerUser
        let names = (0..<users).map { "\(run)_\($0)" }
        BenchCleanup.shared.roles = names
        let tokens = try await signedTokens(for: names)
        let board = ClientBoard()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var channels: [any Channel] = []
        func closeClients() async {
            board.stop()
            for channel in channels { channel.close(promise: nil) }
            try? await group.shutdownGracefully()
        }
        do {
            let results = try await ramp(
                steps: steps, run: run, relay: relay, idleKiB: idleKiB, names: names, tokens: tokens, board: board,
                group: group, channels: &channels, descriptorLimit: descriptorLimit)
            await closeClients()
            return results
        } catch {
            await closeClients()
            throw error
        }
    }

    /// Adds clients step by step and measures the relay at each step; stops after a step
    /// whose clients were not all answered.
    private static func ramp(
        steps: [Int], run: String, relay: BenchRelay, idleKiB: Double, names: [String], tokens: [String],
        board: ClientBoard, group: MultiThreadedEventLoopGroup, channels: inout [any Channel], descriptorLimit: Int
    ) async throws -> [BenchResult] {
        var results: [BenchResult] = []
        for clients in steps {
            let start = monotonicSeconds()
            board.grow(to: clients)
            var failure: String?
            for first in stride(from: channels.count, to: clients, by: connectBatch) {
                let connecting = (first..<min(first + connectBatch, clients)).map { index in
                    let user = index / maximumSessionsPerUser
                    let spec = ClientSpec(
                        index: index, port: relay.port, token: tokens[user], session: "\(run)-\(index)",
                        zone: .private("Bench\(index % maximumSessionsPerUser)", user: names[user]))
                    return ClientBootstrap(group: group)
                        .channelInitializer { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                                try channel.pipeline.syncOperations.addHandler(WatchClient(spec, board: board))
                            }
                        }
                        .connect(host: "127.0.0.1", port: relay.port)
                }
                for future in connecting {
                    do {
                        channels.append(try await future.get())
                    } catch {
                        failure = failure ?? "connecting client \(channels.count + 1) failed: \(error)"
                    }
                }
                if failure != nil { break }
            }
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
            var note = "\(clients) clients of \((clients + maximumSessionsPerUser - 1) / maximumSessionsPerUser) users "
                + "(\(maximumSessionsPerUser) sessions each), each watching a private zone of its own; "
                + String(
                    format: "relay RSS with no client %.1f MiB; polls sent while clients connected answered within %.1f s; "
                        + "descriptor limit %ld", idleKiB / 1024, window.rampLongest, descriptorLimit)
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

    /// One HS256 token per user, valid for an hour, signed with the relay's secret.
    private static func signedTokens(for names: [String]) async throws -> [String] {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: BenchServer.secret), digestAlgorithm: .sha256)
        var tokens: [String] = []
        for name in names {
            tokens.append(
                try await keys.sign(
                    TokenClaims(
                        sub: .init(value: name), exp: .init(value: Date().addingTimeInterval(3600)),
                        aud: .init(value: [BenchServer.audience]))))
        }
        return tokens
    }

    private struct TokenClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }
}

/// What one client sends.
struct ClientSpec: Sendable {
    let index: Int
    let port: Int
    let token: String
    let session: String
    let zone: ZoneID
}

/// The clients' answers since the window opened (after the last client of a step
/// connected). Every field is protected by the one mutex; the clients' event loops write it,
/// the bench's task reads it.
final class ClientBoard: Sendable {
    struct Window {
        var answered = 0
        var failures = 0
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
            state.window = Window(failures: state.window.failures, firstFailure: state.window.firstFailure)
            state.windowStart = monotonicSeconds()
        }
    }

    /// Whether each of the first `clients` has had a heartbeat in the window or has failed.
    func settled(clients: Int) -> Bool {
        state.withLock { state in
            state.window.answered + state.failed.prefix(clients).lazy.filter { $0 }.count >= clients
        }
    }

    /// Client `index` was answered, `seconds` after sending its poll at `sentAt` (monotonic).
    func answered(_ index: Int, sentAt: Double, seconds: Double, heartbeat: Bool) {
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

    /// From now on, closed connections are the bench's doing.
    func stop() { state.withLock { $0.stopping = true } }
}

/// One client: a connection that holds a long poll on the relay and polls again when
/// answered. Lives on its channel's event loop.
final class WatchClient: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let spec: ClientSpec
    private let board: ClientBoard
    private var token = ChangeToken.initial
    private var request: ByteBuffer?
    private var sentAt = 0.0
    private var status: UInt = 0
    private var body = ByteBuffer()

    init(_ spec: ClientSpec, board: ClientBoard) {
        (self.spec, self.board) = (spec, board)
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status.code
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            let seconds = monotonicSeconds() - sentAt
            guard status == 200 else {
                board.failed(spec.index, "HTTP \(status): \(String(buffer: body).prefix(300))")
                context.close(promise: nil)
                return
            }
            let hints: [RemoteNotification]
            do {
                hints = try JSONDecoder().decode(RelayWire.Hints.self, from: Data(body.readableBytesView)).hints
            } catch {
                board.failed(spec.index, "an answer that is not hints: \(error)")
                context.close(promise: nil)
                return
            }
            for hint in hints where hint.zone == spec.zone && hint.token != token {
                token = hint.token
                request = nil
            }
            board.answered(spec.index, sentAt: sentAt, seconds: seconds, heartbeat: hints.isEmpty)
            send(context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        board.failed(spec.index, "the connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        board.failed(spec.index, "\(error)")
        context.close(promise: nil)
    }

    /// Sends the long poll: the session, and the client's zone with the token it knows.
    private func send(_ context: ChannelHandlerContext) {
        if request == nil {
            let watch = RelayWire.WatchRequest(session: spec.session, zones: [.init(zone: spec.zone, token: token)])
            // The request is this bench's own value: it always encodes.
            request = ByteBuffer(bytes: try! JSONEncoder().encode(watch))
        }
        guard let request else { return }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/watch")
        head.headers.add(name: "Host", value: "127.0.0.1:\(spec.port)")
        head.headers.add(name: "Authorization", value: "Bearer " + spec.token)
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: "\(request.readableBytes)")
        sentAt = monotonicSeconds()
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(request))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
