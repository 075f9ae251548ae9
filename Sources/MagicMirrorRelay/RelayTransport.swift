import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
import Synchronization

/// The HTTP side of ``RelayDatabase``: JSON requests to the relay with a bearer token, the
/// token asked for again once when the relay answers that it expired, and the relay's JSON
/// errors turned into ``MirrorError``s.
final class RelayTransport: Sendable {
    let baseURL: URL
    let session: URLSession
    private let tokenProvider: @Sendable () async throws -> String
    private let token = Mutex<String?>(nil)

    init(baseURL: URL, session: URLSession, tokenProvider: @escaping @Sendable () async throws -> String) {
        self.baseURL = baseURL
        self.session = session
        self.tokenProvider = tokenProvider
    }

    /// POSTs `body` to `/v1/<path>` and decodes the answer as `Answer`.
    ///
    /// - Parameters:
    ///   - headers: More headers (`Idempotency-Key`).
    ///   - timeout: How long to wait for the answer.
    /// - Throws: A ``MirrorError``: the relay's error, `unavailable` when the relay cannot be
    ///   reached (the connection fails, or a balancer in front of it answers 502, 503 or
    ///   504) or answers something that is not the protocol.
    func post<Body: Encodable, Answer: Decodable>(
        _ path: String, _ body: Body, headers: [String: String] = [:], timeout: TimeInterval = 60,
        as: Answer.Type = Answer.self
    ) async throws -> Answer {
        let data: Data
        do {
            data = try JSONEncoder().encode(body)
        } catch {
            throw MirrorError(.encodingFailed, "encoding a request to the relay: \(error)", underlying: error)
        }
        var refreshed = false
        while true {
            let bearer = try await currentToken(refresh: refreshed)
            var request = URLRequest(url: baseURL.appendingPathComponent("v1/" + path), timeoutInterval: timeout)
            request.httpMethod = "POST"
            request.httpBody = data
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer " + bearer, forHTTPHeaderField: "Authorization")
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            let (answer, response): (Data, URLResponse)
            do {
                (answer, response) = try await Self.send(request, on: session)
            } catch {
                throw MirrorError(
                    .unavailable, "the relay at \(baseURL.absoluteString) cannot be reached: \(error.localizedDescription)",
                    underlying: error)
            }
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if (200..<300).contains(status) {
                do {
                    return try JSONDecoder().decode(Answer.self, from: answer)
                } catch {
                    throw MirrorError(.unavailable, "the relay answered \(path) with a body that is not the protocol's", underlying: error)
                }
            }
            let detail = (try? JSONDecoder().decode(RelayWire.ErrorBody.self, from: answer))?.error
            if detail == nil, Self.gatewayStatuses.contains(status) {
                // Not the relay's answer but a balancer's in front of it: the relay died or
                // could not be reached, perhaps after storing a commit.
                throw MirrorError(
                    .unavailable,
                    "the relay behind \(baseURL.absoluteString) cannot be reached: a gateway answered \(path) with HTTP \(status)",
                    underlying: GatewayFailure(status: status))
            }
            if status == 401, detail?.code == "tokenExpired", !refreshed {
                refreshed = true
                continue
            }
            throw Self.mirrorError(status: status, detail, path: path)
        }
    }

    /// The statuses a balancer or proxy answers with when the relay behind it died, refused
    /// the connection or did not answer in time (the relay's own errors carry its JSON body).
    static let gatewayStatuses: Set = [502, 503, 504]

    /// A gateway's answer (`502`, `503`, `504` without the relay's JSON error): the relay
    /// could not be reached, as when the connection to it fails.
    struct GatewayFailure: Error {
        let status: Int
    }

    /// Whether `error` says the relay could not be reached (a request may or may not have
    /// been served): the connection failed, or a gateway answered for the relay.
    static func couldNotReach(_ error: MirrorError) -> Bool {
        error.kind == .unavailable && (error.underlying is URLError || error.underlying is GatewayFailure)
    }

    /// Sends `request` through the completion-handler API: FoundationNetworking's
    /// `data(for:)` can stop the process when the task that awaits it is cancelled ("a task
    /// that is not in the registry"), so a request here is never cancelled by its caller; it
    /// ends with its answer or its timeout.
    ///
    /// The timeout is the request's `timeoutInterval`, kept here too: FoundationNetworking
    /// let a request over a link cut without a reset wait 60 seconds (the session's
    /// default) where it asked for 10, so a dead link went unnoticed for a minute.
    private static func send(_ request: URLRequest, on session: URLSession) async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            let phase = Mutex(SendPhase.running)
            let task = session.dataTask(with: request) { data, response, error in
                let expired = phase.withLock { phase in
                    defer { phase = .done }
                    return phase == .expired
                }
                if let data, let response {
                    continuation.resume(returning: (data, response))
                } else if expired {
                    continuation.resume(throwing: URLError(.timedOut))
                } else {
                    continuation.resume(throwing: error ?? URLError(.badServerResponse))
                }
            }
            task.resume()
            DispatchQueue.global().asyncAfter(deadline: .now() + request.timeoutInterval) {
                let expire = phase.withLock { phase in
                    guard phase == .running else { return false }
                    phase = .expired
                    return true
                }
                if expire { task.cancel() }
            }
        }
    }

    /// Where a request sent by ``send(_:on:)`` is: answered (or failed), or given up at its
    /// timeout.
    private enum SendPhase { case running, expired, done }

    /// The token to send: the one kept, or a new one from the provider.
    private func currentToken(refresh: Bool) async throws -> String {
        if !refresh, let kept = token.withLock({ $0 }) { return kept }
        let fresh: String
        do {
            fresh = try await tokenProvider()
        } catch let error as MirrorError {
            throw error
        } catch {
            throw MirrorError(.accountUnavailable, "the token provider failed: \(error)", underlying: error)
        }
        token.withLock { $0 = fresh }
        return fresh
    }

    /// The error the relay's answer names.
    static func mirrorError(status: Int, _ detail: RelayWire.ErrorBody.Detail?, path: String) -> MirrorError {
        let message = "the relay refused \(path) (HTTP \(status)): \(detail?.message ?? "no explanation")"
        let kind: MirrorError.Kind = if let code = detail?.code, let known = MirrorError.Kind.Code(rawValue: code) {
            MirrorError.Kind(known)
        } else {
            switch (status, detail?.code) {
            case (401, _), (403, _): .permissionDenied
            case (413, _): .invalidRecord
            case (400, _), (404, _), (405, _): .unsupported
            default: .unavailable
            }
        }
        var error = MirrorError(kind, message, recordIDs: detail?.recordIDs ?? [])
        error.nothingStored = detail?.nothingStored ?? false
        return error
    }
}
