import Foundation
import HTTPTypes
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Where a stream's lines go: its connection, written by the hub from the connection's
/// event loop.
///
/// A commit heard by a thousand streams is a thousand writes. Each stream's own task,
/// woken to write its line through Hummingbird's body writer, cost a wake-up, a hop to the
/// cooperative pool and one back to the event loop per line: about 30 µs of the relay's
/// processor per line, most of the fan-out's cost. The hub instead groups the streams by
/// event loop and writes each loop's lines in one job on that loop (``RelayHub``); the
/// stream's task only waits for the stream's end and writes its last chunk. Its lines are
/// written between the head, which Hummingbird writes before the task starts, and the end,
/// which the task writes after the hub stopped writing (``RelayHub/stop(_:)``): both go to
/// the same loop, in order.
struct StreamOutlet: Sendable {
    /// The loop that ``write`` runs on.
    let loop: any EventLoop
    /// Whether the connection is open: a stream whose client closed its connection ends at
    /// its next write (a heartbeat's at the latest), and no longer counts against its user.
    let isOpen: @Sendable () -> Bool
    /// Whether the connection takes a line now: a client that stops reading fills its send
    /// buffer, and its hints wait in its queue (bounded, coalesced) instead of in memory here.
    let isWritable: @Sendable () -> Bool
    /// Writes and sends a line; called on ``loop``.
    let write: @Sendable (ByteBuffer) -> Void
    /// Closes the connection: a write that the client never takes ends only so.
    let abort: @Sendable () -> Void

    /// A stream's connection, whose answer's head was written: lines go as chunks of the body.
    init(channel: any Channel) {
        loop = channel.eventLoop
        isOpen = { channel.isActive }
        isWritable = { channel.isWritable }
        write = { line in channel.writeAndFlush(HTTPResponsePart.body(line), promise: nil) }
        abort = { channel.close(promise: nil) }
    }

    init(
        loop: any EventLoop, isOpen: @escaping @Sendable () -> Bool, isWritable: @escaping @Sendable () -> Bool,
        write: @escaping @Sendable (ByteBuffer) -> Void, abort: @escaping @Sendable () -> Void
    ) {
        (self.loop, self.isOpen, self.isWritable, self.write, self.abort) = (loop, isOpen, isWritable, write, abort)
    }
}

/// The line a stream writes for some hints (their JSON and `\n`), encoded once for every
/// stream that writes the same hints next: a commit to a zone that a thousand clients watch
/// is usually the one hint each of their queues holds.
final class StreamLines: Sendable {
    private let last = Mutex<(hints: [RemoteNotification], line: ByteBuffer)?>(nil)

    func line(for hints: [RemoteNotification]) throws -> ByteBuffer {
        if let line = last.withLock({ $0.flatMap { $0.hints == hints ? $0.line : nil } }) { return line }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        var data = try encoder.encode(RelayWire.Hints(hints: hints))
        data.append(0x0A)
        let line = ByteBuffer(bytes: data)
        last.withLock { $0 = (hints, line) }
        return line
    }
}
