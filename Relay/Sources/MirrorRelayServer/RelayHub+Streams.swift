import Foundation
import HTTPTypes
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import Synchronization

/// The hub's streams (`/v1/stream`): opened as a poll's session is, their lines written by the
/// hub on each stream's connection (``StreamOutlet``), one job per event loop for the streams
/// a burst of hints reaches, and a tick a second for heartbeats and ends.
extension RelayHub {
    /// A session opened for a stream (`/v1/stream`), whose lines the hub writes once
    /// ``started(_:outlet:)`` gave it an outlet.
    struct Stream: Sendable {
        let key: SessionKey
        let waiter: UInt64
        /// Ends when the stream should: its time is up (``beat(now:)``), its session is
        /// forgotten, another poll or stream of it begins, or it is stopped.
        let ended: AsyncStream<Void>
    }

    /// Opens a stream until `ends`: registers the session's zones as a poll does. The
    /// caller calls ``started(_:outlet:)`` once the answer's head is written: the first line
    /// (the queue, or a heartbeat) says the stream is up. Nothing waits per stream: hints
    /// and the heartbeats of ``beat(now:)`` schedule writes. A session whose stream wrote
    /// nothing for `RelayWire.deadLinkSeconds` (its client reads too slowly, or not at all)
    /// is forgotten by ``sweep(now:)``, which ends `ended`. The caller calls ``stop(_:)``
    /// before it writes the answer's end, and ``close(_:started:)`` after.
    ///
    /// - Throws: ``RelayFailure`` 429 when the user's streams being written are at the
    ///   limit of sessions; as ``poll(_:subject:database:)``.
    func openStream(
        _ request: RelayWire.WatchRequest, subject: String, database: PostgreSQLDatabase,
        until ends: ContinuousClock.Instant
    ) async throws -> Stream {
        guard state.withLock({ $0.streams[subject] ?? 0 }) < Self.maximumSessionsPerSubject else {
            throw RelayFailure(
                .tooManyRequests, "tooManyRequests",
                "a user reads at most \(Self.maximumSessionsPerSubject) streams at once")
        }
        let key = try await open(request, subject: subject, database: database, registering: false)
        let (ended, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let waiter = state.withLock { state -> UInt64? in
            guard var session = state.sessions[key] else { return nil }
            let waiter = state.nextWaiter
            state.nextWaiter += 1
            session.endStream()
            (session.wake, session.waiter, session.streaming) = (wake, waiter, true)
            (session.streamEnds, session.lastSeen) = (ends, .now)
            state.sessions[key] = session
            return waiter
        }
        if waiter == nil { wake.finish() }
        return Stream(key: key, waiter: waiter ?? 0, ended: ended)
    }

    /// The stream's answer is being written, to `outlet`: counted against its user's
    /// streams until ``close(_:started:)``; `false` (nothing counted, nothing written) when
    /// the user's streams are at the limit. Its first line is scheduled at once.
    /// ``beat(now:)`` calls the outlet's `abort` when the stream is still written
    /// `RelayWire.deadLinkSeconds` after its end (a write its client never takes).
    func started(_ stream: Stream, outlet: StreamOutlet) -> Bool {
        let first = state.withLock { state -> [StreamFlush]? in
            guard state.streams[stream.key.subject, default: 0] < Self.maximumSessionsPerSubject else { return nil }
            state.streams[stream.key.subject, default: 0] += 1
            state.writing[stream.waiter] = (state.sessions[stream.key]?.streamEnds ?? .now, outlet.abort)
            guard let index = state.sessions.index(forKey: stream.key),
                  state.sessions.values[index].streaming, state.sessions.values[index].waiter == stream.waiter
            else { return [] }
            state.sessions.values[index].outlet = outlet
            state.sessions.values[index].flushing = true
            return [StreamFlush(key: stream.key, waiter: stream.waiter, outlet: outlet)]
        }
        guard let first else { return false }
        schedule(first)
        return true
    }

    /// The hub writes no more of the stream, and ends it if it had not ended: its caller
    /// writes the answer's end next. The session, unless another poll or stream took it,
    /// waits for its client's next poll or stream, and is forgotten after
    /// `RelayWire.deadLinkSeconds` without one.
    func stop(_ stream: Stream) {
        state.withLock { state in
            guard let index = state.sessions.index(forKey: stream.key), state.sessions.values[index].streaming,
                  state.sessions.values[index].waiter == stream.waiter
            else { return }
            state.sessions.values[index].endStream()
            state.sessions.values[index].lastSeen = .now
        }
    }

    /// The stream's answer is written (`started`: after ``started(_:outlet:)`` said yes).
    func close(_ stream: Stream, started: Bool) {
        stop(stream)
        guard started else { return }
        state.withLock { state in
            state.streams[stream.key.subject, default: 1] -= 1
            if state.streams[stream.key.subject] == 0 { state.streams[stream.key.subject] = nil }
            state.writing[stream.waiter] = nil
        }
    }

    /// A write of a stream's queue to schedule on its outlet's loop.
    struct StreamFlush {
        let key: SessionKey
        let waiter: UInt64
        let outlet: StreamOutlet
    }

    /// Schedules the writes: one job per event loop.
    func schedule(_ flushes: [StreamFlush]) {
        guard !flushes.isEmpty else { return }
        var byLoop: [ObjectIdentifier: [StreamFlush]] = [:]
        for flush in flushes { byLoop[ObjectIdentifier(flush.outlet.loop), default: []].append(flush) }
        for batch in byLoop.values {
            batch[0].outlet.loop.execute { [self] in flush(batch) }
        }
    }

    /// Writes each stream's queue (none: a heartbeat), on its outlet's loop. A stream that
    /// ended or was taken over is skipped; one whose connection closed ends; one whose
    /// connection takes nothing now keeps its queue for a later write (a hint's, or the next
    /// ``beat(now:)``'s).
    private func flush(_ batch: [StreamFlush], now: ContinuousClock.Instant = .now) {
        let writes = state.withLock { state in
            batch.compactMap { flush -> (StreamOutlet, [RemoteNotification])? in
                guard let index = state.sessions.index(forKey: flush.key), state.sessions.values[index].outlet != nil,
                      state.sessions.values[index].waiter == flush.waiter
                else { return nil }
                state.sessions.values[index].flushing = false
                guard flush.outlet.isOpen() else {
                    state.sessions.values[index].endStream()
                    return nil
                }
                guard now < state.sessions.values[index].streamEnds, flush.outlet.isWritable() else { return nil }
                state.sessions.values[index].lastSeen = now
                return (flush.outlet, state.sessions.values[index].queue.drain())
            }
        }
        for (outlet, hints) in writes {
            do {
                outlet.write(try lines.line(for: hints))
            } catch {
                // Never seen: hints always encode. The client's next stream gets them again
                // (the relay resends a zone's latest hint to a client behind it).
                outlet.abort()
            }
        }
    }

    /// Ends each stream whose time is up; writes each stream that has written nothing for
    /// about `RelayWire.pollSeconds` (a heartbeat) or whose queue waits for its connection to
    /// take a line; closes the connection of a stream still written long after its end.
    /// Called every second.
    func beat(now: ContinuousClock.Instant = .now) {
        let (ended, due, stuck) = state.withLock { state in
            var ended: [AsyncStream<Void>.Continuation] = []
            var due: [StreamFlush] = []
            let quiet = Duration.seconds(RelayWire.pollSeconds) - .milliseconds(500)
            for index in state.sessions.indices where state.sessions.values[index].streaming {
                if now >= state.sessions.values[index].streamEnds {
                    if let wake = state.sessions.values[index].wake { ended.append(wake) }
                } else if let outlet = state.sessions.values[index].outlet, !state.sessions.values[index].flushing,
                    !state.sessions.values[index].queue.isEmpty || now - state.sessions.values[index].lastSeen >= quiet
                {
                    state.sessions.values[index].flushing = true
                    due.append(StreamFlush(
                        key: state.sessions.keys[index], waiter: state.sessions.values[index].waiter, outlet: outlet))
                }
            }
            // Closed once: the write then fails, and the stream's close(_:started:) forgets it.
            let stuck = state.writing.filter { now - $0.value.ends > .seconds(RelayWire.deadLinkSeconds) }
            for number in stuck.keys { state.writing[number]?.ends = .now + .seconds(3600) }
            return (ended, due, stuck.values.map(\.abort))
        }
        for wake in ended { wake.finish() }
        schedule(due)
        for abort in stuck { abort() }
    }
}
