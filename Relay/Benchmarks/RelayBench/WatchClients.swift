import Foundation
import JWTKit
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The users a workload's clients act as, `RUN_0`, `RUN_1`, …: at most
/// ``maximumSessionsPerUser`` clients each, client `i` of user `i / 16`.
enum BenchUsers {
    /// The relay's cap on a user's sessions.
    static let maximumSessionsPerUser = 16

    /// The names of enough users for `clients` clients, registered with the cleanup.
    static func names(run: String, clients: Int) -> [String] {
        let names = (0..<(clients + maximumSessionsPerUser - 1) / maximumSessionsPerUser).map { "\(run)_\($0)" }
        BenchCleanup.shared.addRoles(names)
        return names
    }

    /// One HS256 token per user, valid for an hour, signed with the relay's secret.
    static func tokens(for names: [String]) async throws -> [String] {
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

    /// Client `index` of a run: session `RUN-index`, as user `index / 16` (of
    /// ``BenchUsers/names(run:clients:)``, whose tokens, in the same order, are `tokens`),
    /// watching `zone`.
    init(index: Int, run: String, port: Int, tokens: [String], zone: ZoneID) {
        (self.index, self.port, self.zone) = (index, port, zone)
        token = tokens[index / BenchUsers.maximumSessionsPerUser]
        session = "\(run)-\(index)"
    }
}

/// What hears the clients' answers. Its methods are called on the clients' event loops.
protocol WatchBoard: Sendable {
    /// Client `index`'s poll, sent at `sentAt`, was answered at `answeredAt` (monotonic
    /// seconds) with `hints` (none: a heartbeat).
    func answered(_ index: Int, sentAt: Double, answeredAt: Double, hints: [RemoteNotification])
    /// Client `index` failed: an error status, an answer that is not hints, a closed
    /// connection.
    func failed(_ index: Int, _ reason: String)
    /// Client `index`'s poll was answered 503, try again (as `RelayDatabase` does): it polls
    /// again after the answer's `Retry-After`.
    func toldToRetry(_ index: Int)
    /// From now on, closed connections are the bench's doing.
    func stop()
}

/// The clients of one workload: SwiftNIO connections on two event-loop threads of this
/// process, each a ``WatchClient``. Used by one task.
final class WatchClients {
    /// Clients connected at once.
    static let connectBatch = 250

    let board: any WatchBoard
    /// Whether the clients read streams (`/v1/stream`) rather than long polls (`/v1/watch`).
    let streamed: Bool
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    private let lines = DecodedLines()
    private(set) var channels: [any Channel] = []

    private init(board: any WatchBoard, streamed: Bool) { (self.board, self.streamed) = (board, streamed) }

    /// Runs `body` with a pool of clients that report to `board`, then closes them, also
    /// when `body` throws.
    static func with<Result>(
        board: any WatchBoard, streamed: Bool, _ body: (WatchClients) async throws -> Result
    ) async throws -> Result {
        let pool = WatchClients(board: board, streamed: streamed)
        do {
            let result = try await body(pool)
            await pool.close()
            return result
        } catch {
            await pool.close()
            throw error
        }
    }

    /// Connects a client for each of `specs`, ``connectBatch`` at a time; returns the first
    /// failure, after which it connects no further batch.
    func connect(_ specs: [ClientSpec], port: Int) async -> String? {
        var failure: String?
        for first in stride(from: 0, to: specs.count, by: Self.connectBatch) {
            let connecting = specs[first..<min(first + Self.connectBatch, specs.count)].map { spec in
                ClientBootstrap(group: group)
                    .channelInitializer { [board, streamed, lines] channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHTTPClientHandlers()
                            try channel.pipeline.syncOperations.addHandler(
                                WatchClient(spec, board: board, streamed: streamed, lines: lines))
                        }
                    }
                    .connect(host: "127.0.0.1", port: port)
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
        return failure
    }

    /// Stops the board, closes every connection and the event loops.
    private func close() async {
        board.stop()
        for channel in channels { channel.close(promise: nil) }
        channels = []
        try? await group.shutdownGracefully()
    }
}

/// One client: a connection that holds a long poll on the relay and polls again when
/// answered, with the latest token of its zone that a hint brought; or, `streamed`, that
/// reads a stream of lines of hints and opens another when it ends. Lives on its channel's
/// event loop.
final class WatchClient: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let spec: ClientSpec
    private let board: any WatchBoard
    private let streamed: Bool
    private let lines: DecodedLines
    private var token = ChangeToken.initial
    private var request: ByteBuffer?
    private var sentAt = 0.0
    private var status: UInt = 0
    private var retryAfter: Int64 = 1
    private var body = ByteBuffer()

    init(_ spec: ClientSpec, board: any WatchBoard, streamed: Bool, lines: DecodedLines) {
        (self.spec, self.board, self.streamed, self.lines) = (spec, board, streamed, lines)
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status.code
            retryAfter = head.headers["Retry-After"].first.flatMap { Int64($0) }.map { min(max($0, 1), 30) } ?? 1
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
            if streamed, status == 200 { readLines(context) }
        case .end:
            if streamed, status == 200 {
                // The relay ended the stream (its time, or the token's): open another.
                readLines(context)
                send(context)
                return
            }
            let answeredAt = monotonicSeconds()
            if status == 503 {
                board.toldToRetry(spec.index)
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .seconds(retryAfter)) {
                    let (client, context) = bound.value
                    if context.channel.isActive { client.send(context) }
                }
                return
            }
            guard status == 200 else {
                board.failed(spec.index, "HTTP \(status): \(String(buffer: body).prefix(300))")
                context.close(promise: nil)
                return
            }
            guard answer(Data(body.readableBytesView), at: answeredAt, context) else { return }
            send(context)
        }
    }

    /// Hands the board each complete line of the stream read so far.
    private func readLines(_ context: ChannelHandlerContext) {
        while let newline = body.readableBytesView.firstIndex(of: 0x0A) {
            let length = newline - body.readerIndex
            let line = body.readData(length: length) ?? Data()
            body.moveReaderIndex(forwardBy: 1)
            let answeredAt = monotonicSeconds()
            guard answer(line, at: answeredAt, context) else { return }
            // The next line's wait starts now.
            sentAt = answeredAt
        }
        body.discardReadBytes()
    }

    /// Hands the board an answer (a poll's, or a stream's line); false, having closed the
    /// connection, when it is not hints.
    private func answer(_ data: Data, at answeredAt: Double, _ context: ChannelHandlerContext) -> Bool {
        let hints: [RemoteNotification]
        do {
            hints = try lines.hints(in: data)
        } catch {
            board.failed(spec.index, "an answer that is not hints: \(error)")
            context.close(promise: nil)
            return false
        }
        for hint in hints where hint.zone == spec.zone && hint.token != token {
            token = hint.token
            request = nil
        }
        board.answered(spec.index, sentAt: sentAt, answeredAt: answeredAt, hints: hints)
        return true
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
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: streamed ? "/v1/stream" : "/v1/watch")
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

/// The hints of the answers the clients read, each distinct answer decoded once: the relay
/// writes the same bytes to every client of a zone that had the same hints queued, and a
/// thousand clients each decoding them would make this load generator, on the relay's own
/// cores, spend more on JSON than the relay spends on writing (a client on a device of its
/// own decodes only its own). Every client still reads and parses each byte of HTTP; a
/// line unlike the last few is decoded as it comes.
final class DecodedLines: Sendable {
    /// The lines decoded most recently (at most ``capacity``) and their hints.
    private let recent = Mutex<[Data: [RemoteNotification]]>([:])
    static let capacity = 256

    /// The hints of `line`, or an error when it is not the protocol's hints.
    func hints(in line: Data) throws -> [RemoteNotification] {
        if let known = recent.withLock({ $0[line] }) { return known }
        let hints = try JSONDecoder().decode(RelayWire.Hints.self, from: line).hints
        recent.withLock { recent in
            if recent.count >= Self.capacity { recent.removeAll(keepingCapacity: true) }
            recent[line] = hints
        }
        return hints
    }
}
