import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The bytes of request bodies the relay holds in memory at once (`--max-inflight-bytes`),
/// counted from each body's first byte until its request is answered, so that many large
/// commits sent at once cannot take the relay's memory: a request that would pass the
/// budget is answered 503 with `Retry-After` and stores nothing, and a client sends it
/// again. A body that alone is larger than the budget can never be held: it is a 413.
///
/// Only bodies held whole count: an asset upload goes to a temporary file as it arrives.
/// The relay's memory for a body is a few times its size (the decoded records, the
/// statement that stores them).
final class RelayBodyBudget: Sendable {
    /// The most bytes held at once.
    let limit: Int
    private let held = Mutex(0)

    init(limit: Int) { self.limit = limit }

    /// The bytes held now.
    var heldBytes: Int { held.withLock { $0 } }

    /// Takes `bytes` from the budget; `false`, taking nothing, when that would pass it.
    func take(_ bytes: Int) -> Bool {
        held.withLock { held in
            guard held + bytes <= limit else { return false }
            held += bytes
            return true
        }
    }

    /// Gives back what ``take(_:)`` took.
    func giveBack(_ bytes: Int) {
        held.withLock { $0 -= bytes }
    }

    /// The answer to a body the budget cannot hold now.
    func busy() -> RelayFailure {
        RelayFailure(
            .serviceUnavailable, "unavailable",
            "the relay is busy: it holds at most \(limit) bytes of requests at once (--max-inflight-bytes); "
                + "nothing was stored; send the request again",
            retryAfterSeconds: 1)
    }
}

extension RelayRoutes {
    /// Reads the request's body, at most `limit` bytes, counted against the body budget
    /// until `handle` returns; decodes it as `type`; runs `handle` with it.
    ///
    /// - Throws: A ``RelayFailure``: 413 for a body over `limit` or over the whole budget
    ///   (declared or as it arrives), 503 `unavailable` when the budget cannot hold it now,
    ///   400 for a body that is not a `type`; what `handle` throws.
    func withBody<Body: Decodable, Result>(
        _ request: Request, _ type: Body.Type, limit: Int, _ handle: (Body) async throws -> Result
    ) async throws -> Result {
        let largest = min(limit, budget.limit)
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > largest { throw Self.tooLarge(largest) }
        var taken = 0
        defer { budget.giveBack(taken) }
        if let declared {
            guard budget.take(declared) else { throw budget.busy() }
            taken = declared
        }
        var buffer = ByteBuffer()
        for try await part in request.body {
            guard buffer.readableBytes + part.readableBytes <= largest else { throw Self.tooLarge(largest) }
            let more = buffer.readableBytes + part.readableBytes - taken
            if more > 0 {
                guard budget.take(more) else { throw budget.busy() }
                taken += more
            }
            var part = part
            buffer.writeBuffer(&part)
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
        } catch {
            throw RelayFailure.badRequest("the request's body is not a \(type) in JSON: \(error)")
        }
        buffer = ByteBuffer()
        return try await handle(body)
    }

    private static func tooLarge(_ limit: Int) -> RelayFailure {
        RelayFailure(.contentTooLarge, "payloadTooLarge", "the request's body is larger than \(limit) bytes")
    }
}
