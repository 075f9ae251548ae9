import Foundation
import HTTPTypes
import Logging
import MagicMirror
import MirrorTestSupport
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
@testable import MirrorRelayServer
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// `/v1/stream`: the long poll's body answered with a stream of lines of hints, read here
/// as a client that reads a streamed answer would, off a raw connection.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayStreamTests {
    /// A stream's first line comes at once; a commit to the zone comes as a line naming its
    /// record; a line with no hints (the heartbeat) comes while nothing changes.
    @Test func aStreamAnswersLinesOfHintsAndHeartbeats() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let zone = ZoneID.public("Todo")
            let stream = try await HintStream.open(relay, token: try await RelayTestServer.token(user), session: "s1", zones: [zone])
            #expect(stream.status == 200, "\(stream.head)")
            #expect(stream.head.lowercased().contains("content-type: application/x-ndjson"), "\(stream.head)")
            _ = try await stream.nextLine()
            try await relay.client(RelayTestServer.uniqueName("writer")).commit(
                [.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))], to: zone)
            var heard: [String] = []
            while !heard.contains("a"), let line = try await stream.nextLine() {
                heard += line.filter { $0.zone == zone }.flatMap(\.recordIDs)
            }
            #expect(heard.contains("a"))
            var heartbeat = false
            while !heartbeat, let line = try await stream.nextLine() { heartbeat = line.isEmpty }
            #expect(heartbeat, "a line with no hints while nothing changed")
            stream.close()
        }
    }

    /// A stream ends when its token expires (the client opens another with a new token),
    /// and the expired token is refused.
    @Test func aStreamEndsWhenItsTokenExpires() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user, expiresIn: 3)
            let stream = try await HintStream.open(relay, token: token, session: "s1", zones: [.private("Todo", user: user)])
            #expect(stream.status == 200)
            var lines = 0
            while try await stream.nextLine() != nil { lines += 1 }
            #expect(stream.ended, "the stream ended with its last chunk, not a broken connection")
            #expect(lines >= 1)
            let again = try await relay.send(
                "/v1/stream", body: try RelayAbuseTests.watch("s1", .private("Todo", user: user)), token: token)
            #expect(again.status == 401)
            #expect(String(decoding: again.body, as: UTF8.self).contains("tokenExpired"))
        }
    }

    /// A long poll of a session that a stream serves takes the session over: the stream
    /// ends, and the poll is answered.
    @Test func aPollTakesOverTheStreamOfItsSession() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user)
            let zone = ZoneID.private("Todo", user: user)
            let stream = try await HintStream.open(relay, token: token, session: "s1", zones: [zone])
            _ = try await stream.nextLine()
            let poll = try await relay.send("/v1/watch", body: try RelayAbuseTests.watch("s1", zone), token: token)
            #expect(poll.status == 200)
            while try await stream.nextLine() != nil {}
            #expect(stream.ended)
        }
    }

    /// Streams are checked as polls are: no token, a body that is not a watch: a JSON error,
    /// not a stream. A stream naming another user's private zone, as a poll, hears nothing
    /// of it: row-level security shows the user none of its changes.
    @Test func aStreamIsCheckedAsAPollIs() async throws {
        try await RunningRelay.with { relay in
            let (alice, bob) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let token = try await RelayTestServer.token(bob)
            let none = try await relay.send("/v1/stream", body: try RelayAbuseTests.watch("s1", .public("Todo")), token: nil)
            #expect(none.status == 401)
            let garbage = try await relay.send("/v1/stream", body: Data("{\"session\":".utf8), token: token)
            #expect(garbage.status == 400)
            let alicesZone = ZoneID.private("Todo", user: alice)
            let bobsZone = ZoneID.private("Todo", user: bob)
            let stream = try await HintStream.open(relay, token: token, session: "s1", zones: [alicesZone, bobsZone])
            #expect(stream.status == 200)
            _ = try await stream.nextLine()
            try await relay.client(alice).commit(
                [.save("secret", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))],
                to: alicesZone)
            try await relay.client(bob).commit(
                [.save("own", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 2, counter: 0))],
                to: bobsZone)
            // Bob's own commit, made after alice's, comes; nothing of alice's comes with it or before.
            var heard: [RemoteNotification] = []
            while !heard.contains(where: { $0.recordIDs.contains("own") }), let line = try await stream.nextLine() {
                heard += line
            }
            #expect(heard.contains { $0.recordIDs.contains("own") })
            #expect(!heard.contains { $0.zone == alicesZone || $0.recordIDs.contains("secret") }, "\(heard)")
            stream.close()
        }
    }

    /// A stream opened while a long poll of its session waits takes the session over: the
    /// poll is answered, and the stream goes on with hints (it used to lose its wake-up to
    /// the poll's end, and hang for ever).
    @Test func aStreamOpenedWhileAPollOfItsSessionWaitsGoesOn() async throws {
        try await HubFixture.with { relay, hub, user, database in
            let zone = ZoneID.private("Todo", user: user)
            let acting = PostgreSQLActingUser(role: user)
            let request = RelayWire.WatchRequest(session: "s1", zones: [.init(zone: zone, token: .initial)])
            let poll = Task {
                try await PostgreSQLActingUser.$current.withValue(acting) {
                    try await hub.poll(request, subject: user, database: database)
                }
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while !hub.isPolling(subject: user, session: "s1"), ContinuousClock.now < deadline { await Task.yield() }
            #expect(hub.isPolling(subject: user, session: "s1"))
            let stream = try await HubFixture.openStream(hub, user: user, database: database, session: "s1")
            #expect(try await poll.value == [], "the poll, taken over, answers nothing")
            try await PostgreSQLActingUser.$current.withValue(acting) {
                _ = try await database.commit(
                    [.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))], to: zone)
            }
            let outlet = RecordingOutlet()
            #expect(hub.started(stream, outlet: outlet.outlet))
            var heard: [String] = []
            for await hints in outlet.lines {
                heard += hints.flatMap(\.recordIDs)
                if heard.contains("a") { break }
            }
            #expect(heard.contains("a"), "the stream hears the commit")
            hub.close(stream, started: true)
        }
    }

    /// A stream opened again for the same session (a client reconnecting before its old
    /// connection ended) is the one that goes on; the old one ends.
    @Test func aStreamReopenedForItsSessionReplacesTheOldOne() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user)
            let zone = ZoneID.private("Todo", user: user)
            let old = try await HintStream.open(relay, token: token, session: "s1", zones: [zone])
            _ = try await old.nextLine()
            let new = try await HintStream.open(relay, token: token, session: "s1", zones: [zone])
            _ = try await new.nextLine()
            while try await old.nextLine() != nil {}
            #expect(old.ended)
            try await relay.client(user).commit(
                [.save("b", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))], to: zone)
            var heard: [String] = []
            while !heard.contains("b"), let line = try await new.nextLine() { heard += line.flatMap(\.recordIDs) }
            #expect(heard.contains("b"), "the new stream hears the commit")
            new.close()
        }
    }

    /// The relay told to stop (SIGTERM) ends its streams rather than waiting for their time
    /// (60 seconds, a heartbeat every 5): the stream ends within a line or two, and the
    /// relay exits.
    @Test func aRelayToldToStopEndsItsStreams() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let stream = try await HintStream.open(
                relay, token: try await RelayTestServer.token(user), session: "s1", zones: [.private("Todo", user: user)])
            _ = try await stream.nextLine()
            relay.process.kill(SIGTERM)
            var lines = 0
            while try await stream.nextLine() != nil { lines += 1 }
            #expect(stream.ended)
            #expect(lines <= 2, "\(lines) lines after SIGTERM")
            #expect(try await relay.process.wait(timeout: .seconds(60)) == .exited(0))
        }
    }

    /// A user's streams being written count against the user's sessions: a seventeenth is
    /// refused (429) while sixteen are written (a client that stops reading keeps its stream
    /// until the write fails, after its session was swept), and opens once one ends.
    @Test func aUserReadsABoundedNumberOfStreams() async throws {
        try await HubFixture.with { relay, hub, user, database in
            func open(_ session: String) async throws -> RelayHub.Stream {
                try await HubFixture.openStream(hub, user: user, database: database, session: session)
            }
            var streams: [RelayHub.Stream] = []
            for index in 0..<RelayHub.maximumSessionsPerSubject {
                let stream = try await open("s\(index)")
                #expect(hub.started(stream, outlet: RecordingOutlet().outlet))
                streams.append(stream)
            }
            // Their sessions swept (as a stuck client's are): the streams still count.
            hub.sweep(now: .now + .seconds(3600))
            let refused = await #expect(throws: RelayFailure.self) { _ = try await open("more") }
            #expect(refused?.status == .tooManyRequests)
            hub.close(streams[0], started: true)
            let more = try await open("more")
            #expect(hub.started(more, outlet: RecordingOutlet().outlet))
        }
    }

    /// A stream still being written the dead-link time after its end (a write its client
    /// never takes: the client stopped reading) has its connection closed, once; one that
    /// ended is not touched.
    @Test func aStreamWhoseWriteIsNeverTakenHasItsConnectionClosed() async throws {
        try await HubFixture.with { _, hub, user, database in
            func open(_ session: String) async throws -> RelayHub.Stream {
                try await HubFixture.openStream(hub, user: user, database: database, session: session)
            }
            let (stuck, ended) = (try await open("stuck"), try await open("ended"))
            let (stuckOutlet, endedOutlet) = (RecordingOutlet(), RecordingOutlet())
            #expect(hub.started(stuck, outlet: stuckOutlet.outlet))
            #expect(hub.started(ended, outlet: endedOutlet.outlet))
            hub.close(ended, started: true)
            hub.beat(now: .now + .seconds(RelayWire.streamSeconds))
            #expect(stuckOutlet.aborts == 0, "within its time")
            let late = ContinuousClock.now + .seconds(RelayWire.streamSeconds + RelayWire.deadLinkSeconds + 1)
            hub.beat(now: late)
            hub.beat(now: late + .seconds(1))
            #expect(stuckOutlet.aborts == 1)
            #expect(endedOutlet.aborts == 0)
        }
    }

    /// The hub forgets a stream's session that wrote nothing for the dead-link time (a
    /// client that stopped reading), ending the stream, with its subscriptions; one written
    /// a moment ago stays.
    @Test func aStreamThatWritesNothingIsForgotten() async throws {
        try await HubFixture.with { relay, hub, user, database in
            let (stream, _) = try await HubFixture.startedStream(hub, user: user, database: database)
            hub.sweep(now: .now + .seconds(RelayWire.deadLinkSeconds - 1))
            #expect(hub.counts.sessions == 1, "written a moment ago")
            hub.sweep(now: .now + .seconds(RelayWire.deadLinkSeconds + 1))
            #expect(hub.counts == (sessions: 0, watches: 0))
            for await _ in stream.ended {}  // ends: the session is gone
            hub.close(stream, started: true)
        }
    }

    /// A stream whose client closed its connection ends at its next write (here, a
    /// heartbeat's), and frees its place among its user's streams, where it held it until
    /// the stream's time was up.
    @Test func aStreamWhoseConnectionClosedEndsAtItsNextWrite() async throws {
        try await HubFixture.with { relay, hub, user, database in
            let (stream, outlet) = try await HubFixture.startedStream(hub, user: user, database: database)
            outlet.close()
            hub.beat(now: .now + .seconds(RelayWire.pollSeconds))
            for await _ in stream.ended {}  // ends: its connection closed
            hub.close(stream, started: true)
            #expect(hub.counts.sessions == 1, "the session waits for its client's next stream")
            #expect(outlet.written == 1, "nothing written after the close")
            // Its place among the user's streams is free again: sixteen more are written, its
            // session's next stream and fifteen of other sessions.
            for session in ["s1"] + (1..<RelayHub.maximumSessionsPerSubject).map({ "m\($0)" }) {
                let more = try await HubFixture.openStream(hub, user: user, database: database, session: session)
                #expect(hub.started(more, outlet: RecordingOutlet().outlet))
            }
        }
    }

    /// A stream whose connection takes nothing now (its client reads slowly: the send
    /// buffer is full) keeps its hints in its queue, and writes them once the connection
    /// takes lines again.
    @Test func aStreamWhoseConnectionIsFullKeepsItsHints() async throws {
        try await HubFixture.with { relay, hub, user, database in
            let zone = ZoneID.private("Todo", user: user)
            let stream = try await HubFixture.openStream(hub, user: user, database: database, session: "s1")
            let outlet = RecordingOutlet(writable: false)
            #expect(hub.started(stream, outlet: outlet.outlet))
            try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: user)) {
                _ = try await database.commit(
                    [.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))], to: zone)
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while hub.queued(subject: user, session: "s1") == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(hub.queued(subject: user, session: "s1") == 1, "the commit's hint waits in the queue")
            #expect(outlet.written == 0, "nothing is written while the connection takes nothing")
            outlet.setWritable(true)
            hub.beat()
            var heard: [String] = []
            for await hints in outlet.lines {
                heard += hints.flatMap(\.recordIDs)
                if heard.contains("a") { break }
            }
            #expect(heard.contains("a"))
            hub.close(stream, started: true)
        }
    }
}

extension HubFixture {
    /// Stream `s1` of the user (``openStream(_:user:database:session:)``), started on a
    /// ``RecordingOutlet``, whose first line (nothing queued yet) was written.
    static func startedStream(
        _ hub: RelayHub, user: String, database: PostgreSQLDatabase
    ) async throws -> (RelayHub.Stream, RecordingOutlet) {
        let stream = try await openStream(hub, user: user, database: database, session: "s1")
        let outlet = RecordingOutlet()
        #expect(hub.started(stream, outlet: outlet.outlet))
        var lines = outlet.lines.makeAsyncIterator()
        #expect(await lines.next() == [], "the first line: nothing queued yet")
        return (stream, outlet)
    }
}

/// A stream's connection as the hub sees it: each line written is kept (decoded) in
/// `lines`; whether it takes lines is the test's to say; its closes are counted.
final class RecordingOutlet: Sendable {
    let lines: AsyncStream<[RemoteNotification]>
    private let continuation: AsyncStream<[RemoteNotification]>.Continuation
    private let state: Mutex<(open: Bool, writable: Bool, written: Int, aborts: Int)>

    init(writable: Bool = true) {
        (lines, continuation) = AsyncStream.makeStream()
        state = Mutex((true, writable, 0, 0))
    }

    var written: Int { state.withLock { $0.written } }
    var aborts: Int { state.withLock { $0.aborts } }
    func setWritable(_ writable: Bool) { state.withLock { $0.writable = writable } }
    /// The client closed the connection.
    func close() { state.withLock { $0.open = false } }

    var outlet: StreamOutlet {
        StreamOutlet(
            loop: MultiThreadedEventLoopGroup.singleton.next(),
            isOpen: { [self] in state.withLock { $0.open } },
            isWritable: { [self] in state.withLock { $0.writable } },
            write: { [self] line in
                state.withLock { $0.written += 1 }
                let hints = (try? JSONDecoder().decode(RelayWire.Hints.self, from: Data(line.readableBytesView)))?.hints
                continuation.yield(hints ?? [RemoteNotification(
                    databaseIdentifier: "", zone: .public("NotHints"), recordIDs: [], reason: .updated, token: .initial)])
            },
            abort: { [self] in state.withLock { $0.aborts += 1 } })
    }
}

/// A `/v1/stream` answer read off a raw connection: the head, then the chunked body's
/// lines, each decoded as hints.
final class HintStream: @unchecked Sendable {
    // Read by one task at a time (the test's).
    private let connection: RawConnection
    let head: String
    let status: Int
    private var pending: [UInt8]
    private var body: [UInt8] = []
    /// Whether the last chunk came.
    private(set) var ended = false

    private init(connection: RawConnection, head: String, rest: [UInt8]) {
        (self.connection, self.head, pending) = (connection, head, rest)
        status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Sends the stream's request and reads its head.
    static func open(_ relay: RunningRelay, token: String, session: String, zones: [ZoneID]) async throws -> HintStream {
        let body = try JSONEncoder().encode(
            RelayWire.WatchRequest(session: session, zones: zones.map { .init(zone: $0, token: .initial) }))
        let port = relay.url.port ?? 0
        return try await Task.detached {
            let connection = try #require(RawConnection(port: port))
            let request = "POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n" + String(decoding: body, as: UTF8.self)
            #expect(connection.write(request))
            var received: [UInt8] = []
            while true {
                if let end = Self.find([13, 10, 13, 10], in: received) {
                    return HintStream(
                        connection: connection, head: String(decoding: received[..<end], as: UTF8.self),
                        rest: Array(received[(end + 4)...]))
                }
                let more = connection.receive(waitingUpTo: 60)
                guard !more.isEmpty else { throw StreamError("no head within 60 s: \(String(decoding: received, as: UTF8.self))") }
                received += more
            }
        }.value
    }

    /// The next line's hints (empty: a heartbeat); `nil` when the stream ended or the
    /// connection closed.
    func nextLine() async throws -> [RemoteNotification]? {
        try await Task.detached { [self] in try readLine() }.value
    }

    private func readLine() throws -> [RemoteNotification]? {
        while true {
            if let newline = body.firstIndex(of: 10) {
                let line = Array(body[..<newline])
                body.removeSubrange(...newline)
                return try JSONDecoder().decode(RelayWire.Hints.self, from: Data(line)).hints
            }
            if ended { return nil }
            // A chunk: its size in hexadecimal, CRLF, its bytes, CRLF.
            if let sizeEnd = Self.find([13, 10], in: pending),
               let size = Int(String(decoding: pending[..<sizeEnd], as: UTF8.self).split(separator: ";")[0], radix: 16),
               pending.count >= sizeEnd + 2 + size + 2
            {
                body += pending[(sizeEnd + 2)..<(sizeEnd + 2 + size)]
                pending.removeSubrange(..<(sizeEnd + 2 + size + 2))
                if size == 0 { ended = true }
                continue
            }
            let more = connection.receive(waitingUpTo: 60)
            guard !more.isEmpty else { return nil }
            pending += more
        }
    }

    func close() { connection.disconnect() }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    struct StreamError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
