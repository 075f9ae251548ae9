import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The bytes of request bodies the relay holds in memory at once (`--max-inflight-bytes`),
/// so that many large commits sent at once cannot take the relay's memory, and no user can
/// keep the others out:
///
/// - a body is counted as its bytes arrive (never by its declared length), until its request
///   is answered;
/// - a user holds at most half the budget at once; a body larger than that can never be held
///   and is a 413;
/// - a request that would pass the budget, or its user's half, is answered 503 with
///   `Retry-After` and stores nothing, and a client sends it again; a body of at most
///   ``smallBody`` bytes (a poll, a token, a page request, a small commit) is never refused,
///   so one user's large bodies never stop the others' heartbeats;
/// - a body may take ``graceSeconds``, and one second more for each
///   ``minimumBytesPerSecond`` bytes it brought (else 408), so a body sent a byte at a time
///   holds what it sent for about half a minute, not for as long as its sender likes.
///
/// An asset upload does not count: it goes to a temporary file as it arrives. The relay's
/// memory for a body is a few times its size (the decoded records, the statement that
/// stores them).
final class RelayBodyBudget: Sendable {
    /// A body this small is always read (and counted).
    static let smallBody = 64 * 1024
    /// How long any body may take.
    static let graceSeconds = 30.0
    /// The bytes that buy a body one second more than ``graceSeconds``.
    static let minimumBytesPerSecond = 32 * 1024

    /// The most bytes held at once.
    let limit: Int
    /// The most bytes one user holds at once: half the budget.
    var perUser: Int { limit / 2 }

    private struct Held {
        var total = 0
        var bySubject: [String: Int] = [:]
    }
    private let held = Mutex(Held())

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` from the budget for `subject`; `false`, taking nothing, when that would
    /// pass the budget or the subject's half of it, unless `always`.
    func take(_ bytes: Int, for subject: String, always: Bool = false) -> Bool {
        held.withLock { held in
            let own = held.bySubject[subject] ?? 0
            guard always || (held.total + bytes <= limit && own + bytes <= perUser) else { return false }
            held.total += bytes
            held.bySubject[subject] = own + bytes
            return true
        }
    }

    /// Gives back what ``take(_:for:always:)`` took.
    func giveBack(_ bytes: Int, for subject: String) {
        guard bytes > 0 else { return }
        held.withLock { held in
            held.total -= bytes
            let own = (held.bySubject[subject] ?? 0) - bytes
            held.bySubject[subject] = own > 0 ? own : nil
        }
    }

    /// The answer to a body the budget cannot hold now.
    func busy() -> RelayFailure {
        RelayFailure(
            .serviceUnavailable, "unavailable",
            "the relay is busy: it holds at most \(limit) bytes of requests at once, and \(perUser) of one user's "
                + "(--max-inflight-bytes); nothing was stored; send the request again",
            retryAfterSeconds: 1)
    }
}

extension RelayRoutes {
    /// Reads the request's body, at most `limit` bytes, counted against the body budget for
    /// `subject` until `handle` returns; decodes it as `type`; runs `handle` with it.
    ///
    /// - Throws: A ``RelayFailure``: 413 for a body over `limit` or over a user's share of
    ///   the budget (declared or as it arrives), 503 `unavailable` when the budget cannot
    ///   hold it now, 408 for a body that arrives too slowly, 400 for a body that is not a
    ///   `type`; what `handle` throws.
    func withBody<Body: Decodable, Result>(
        _ request: Request, _ type: Body.Type, limit: Int, subject: String, _ handle: (Body) async throws -> Result
    ) async throws -> Result {
        let largest = min(limit, budget.perUser)
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > largest {
            throw Self.tooLarge(largest)
        }
        let start = ContinuousClock.now
        var buffer = ByteBuffer()
        defer { budget.giveBack(buffer.readableBytes, for: subject) }
        for try await part in request.body {
            let received = buffer.readableBytes + part.readableBytes
            guard received <= largest else { throw Self.tooLarge(largest) }
            guard budget.take(part.readableBytes, for: subject, always: received <= RelayBodyBudget.smallBody) else {
                throw budget.busy()
            }
            var part = part
            buffer.writeBuffer(&part)
            let allowed = RelayBodyBudget.graceSeconds + Double(received) / Double(RelayBodyBudget.minimumBytesPerSecond)
            guard ContinuousClock.now - start <= .seconds(allowed) else {
                throw RelayFailure(
                    .requestTimeout, "unavailable",
                    "the request's body arrived slower than \(RelayBodyBudget.minimumBytesPerSecond / 1024) KiB/s "
                        + "after \(Int(RelayBodyBudget.graceSeconds)) s; nothing was stored; send it again")
            }
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
        } catch {
            throw RelayFailure.badRequest("the request's body is not a \(type) in JSON: \(error)")
        }
        return try await handle(body)
    }

    private static func tooLarge(_ limit: Int) -> RelayFailure {
        RelayFailure(.contentTooLarge, "payloadTooLarge", "the request's body is larger than \(limit) bytes")
    }
}
