import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
import Synchronization

/// The HTTP side of ``RelayDatabase``: requests to the relay with a bearer token, the token
/// asked for again once when the relay answers that it expired, and the relay's JSON errors
/// turned into ``MirrorError``s. Bodies go as JSON, as bytes, or streamed from a file;
/// answers come as JSON, or streamed into a file.
final class RelayTransport: Sendable {
    let baseURL: URL
    let session: URLSession

    /// ``RelayDatabase``'s default session: no cache, no cookies. (FoundationNetworking looks
    /// each request up in the session's cache, a directory on disk, whatever the request's
    /// cache policy says.)
    static let uncachedSession: URLSession = {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        return URLSession(configuration: configuration)
    }()

    private let tokenProvider: @Sendable () async throws -> String
    private let token = Mutex<String?>(nil)

    /// What a request sends.
    enum Payload: Sendable {
        /// Bytes in memory, of this content type.
        case data(Data, contentType: String)
        /// A file's bytes, streamed from disk.
        case file(URL)
    }

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
        let answer = try await exchange(
            path, payload: .data(try Self.encode(body), contentType: "application/json"), headers: headers, timeout: timeout)
        return try Self.decode(answer.body, path: path)
    }

    /// POSTs `payload` (bytes, or a file streamed from disk) to `/v1/<path>?<query>` and
    /// decodes the JSON answer as `Answer`.
    func upload<Answer: Decodable>(
        _ path: String, query: String, _ payload: Payload, timeout: TimeInterval, as: Answer.Type = Answer.self
    ) async throws -> Answer {
        try Self.decode(try await exchange(path, query: query, payload: payload, timeout: timeout).body, path: path)
    }

    /// POSTs `body` to `/v1/<path>` and streams the answer's bytes into `destination`
    /// (replaced).
    ///
    /// - Returns: `false` when the relay answered without bytes (204): nothing was written.
    func download<Body: Encodable>(
        _ path: String, _ body: Body, to destination: URL, timeout: TimeInterval
    ) async throws -> Bool {
        let answer = try await exchange(
            path, payload: .data(try Self.encode(body), contentType: "application/json"), timeout: timeout,
            downloadingTo: destination)
        return answer.status != 204
    }

    private static func encode(_ body: some Encodable) throws -> Data {
        do {
            return try JSONEncoder().encode(body)
        } catch {
            throw MirrorError(.encodingFailed, "encoding a request to the relay: \(error)", underlying: error)
        }
    }

    private static func decode<Answer: Decodable>(_ answer: Data, path: String) throws -> Answer {
        do {
            return try JSONDecoder().decode(Answer.self, from: answer)
        } catch {
            throw MirrorError(.unavailable, "the relay answered \(path) with a body that is not the protocol's", underlying: error)
        }
    }

    /// Sends a request with the token (again once with a new token when the relay answers
    /// that it expired) and returns a 2xx answer's status and body; a download's bytes go
    /// to `destination` instead.
    private func exchange(
        _ path: String, query: String? = nil, payload: Payload, headers: [String: String] = [:], timeout: TimeInterval,
        downloadingTo destination: URL? = nil
    ) async throws -> (status: Int, body: Data) {
        var url = baseURL.appendingPathComponent("v1/" + path)
        if let query, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            components.percentEncodedQuery = query
            url = components.url ?? url
        }
        var refreshed = false
        while true {
            let request = try await request(url, payload: payload, headers: headers, timeout: timeout, refreshing: refreshed)
            let (code, answer): (Int, Data)
            do {
                (code, answer) = try await Self.send(request, payload: payload, downloadingTo: destination, on: session)
            } catch {
                throw unreachable(error)
            }
            if (200..<300).contains(code) { return (code, answer) }
            try refuse(status: code, body: answer, path: path, refreshed: &refreshed)
        }
    }

    /// `/v1/<path>`'s request: POST, the payload, the token (a new one when `refreshing`).
    private func request(
        _ url: URL, payload: Payload, headers: [String: String], timeout: TimeInterval, refreshing: Bool
    ) async throws -> URLRequest {
        let bearer = try await currentToken(refresh: refreshing)
        // Nothing the relay answers comes from a cache.
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        switch payload {
        case .data(let data, let contentType):
            request.httpBody = data
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        case .file:
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        request.setValue("Bearer " + bearer, forHTTPHeaderField: "Authorization")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    /// A request that failed on the way: `unavailable`, unless it is a ``MirrorError`` already.
    private func unreachable(_ error: any Error) -> MirrorError {
        if let error = error as? MirrorError { return error }
        return MirrorError(
            .unavailable, "the relay at \(baseURL.absoluteString) cannot be reached: \(error.localizedDescription)",
            underlying: error)
    }

    /// An answer that is not 2xx: returns (with `refreshed` set) when the token expired and
    /// was not refreshed yet, so that the request is sent again with a new one; throws the
    /// error the answer names otherwise.
    private func refuse(status code: Int, body answer: Data, path: String, refreshed: inout Bool) throws {
        let detail = (try? JSONDecoder().decode(RelayWire.ErrorBody.self, from: answer))?.error
        if detail == nil, Self.gatewayStatuses.contains(code) {
            // Not the relay's answer but a balancer's in front of it: the relay died or
            // could not be reached, perhaps after storing a commit.
            throw MirrorError(
                .unavailable,
                "the relay behind \(baseURL.absoluteString) cannot be reached: a gateway answered \(path) with HTTP \(code)",
                underlying: GatewayFailure(status: code))
        }
        if code == 401, detail?.code == "tokenExpired", !refreshed {
            refreshed = true
            return
        }
        throw Self.mirrorError(status: code, detail, path: path)
    }

    /// POSTs `body` to `/v1/<path>` and hands each line of the streamed answer to `line` as
    /// it arrives, until the answer ends (`true`) or `reader` is cancelled (`false`).
    ///
    /// - Parameters:
    ///   - silence: How long the answer may send nothing before the link is taken for dead.
    /// - Throws: As ``post(_:_:headers:timeout:as:)``; `unavailable` when nothing arrived
    ///   for `silence`.
    func stream<Body: Encodable>(
        _ path: String, _ body: Body, silence: Duration, reader: @escaping @Sendable () -> RelayLineReader
    ) async throws -> Bool {
        let url = baseURL.appendingPathComponent("v1/" + path)
        let payload = Payload.data(try Self.encode(body), contentType: "application/json")
        var refreshed = false
        while true {
            // The session's timeout is for the whole answer on some platforms: the stream's
            // own silence is watched by the reader instead.
            let request = try await request(
                url, payload: payload, headers: [:], timeout: TimeInterval(RelayWire.streamSeconds * 2), refreshing: refreshed)
            let answer: (status: Int, errorBody: Data, ending: RelayLineReader.Ending?)
            do {
                answer = try await reader().read(request, configuration: session.configuration, silence: silence)
            } catch {
                throw unreachable(error)
            }
            switch answer.ending {
            case .cancelled: return false
            case .silent:
                throw MirrorError(
                    .unavailable, "the relay at \(baseURL.absoluteString) sent nothing on \(path) for \(silence)",
                    underlying: URLError(.timedOut))
            case .malformed:
                throw MirrorError(.unavailable, "the relay at \(baseURL.absoluteString) answered \(path) with a line that is not the protocol's")
            case nil: break
            }
            if (200..<300).contains(answer.status) { return true }
            try refuse(status: answer.status, body: answer.errorBody, path: path, refreshed: &refreshed)
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
    /// ends with its answer or its timeout. The timeout is the request's `timeoutInterval`,
    /// kept here too: FoundationNetworking let a request over a link cut without a reset wait
    /// 60 seconds (the session's default) where it asked for 10, so a dead link went
    /// unnoticed for a minute. A file payload is streamed from disk (an upload task); with a
    /// `destination`, a 2xx answer's bytes are streamed to disk (a download task) and moved
    /// there, and an error's body is returned.
    private static func send(
        _ request: URLRequest, payload: Payload, downloadingTo destination: URL?, on session: URLSession
    ) async throws -> (Int, Data) {
        try await withCheckedThrowingContinuation { continuation in
            let phase = Mutex(SendPhase.running)
            /// The task's error, `timedOut` when the deadline below ended it.
            @Sendable func failure(_ error: (any Error)?) -> any Error {
                phase.withLock { $0 } == .expired ? URLError(.timedOut) : error ?? URLError(.badServerResponse)
            }
            let task: URLSessionTask
            if let destination {
                task = session.downloadTask(with: request) { location, response, error in
                    phase.withLock { if $0 == .running { $0 = .done } }
                    guard let location, let status = (response as? HTTPURLResponse)?.statusCode else {
                        continuation.resume(throwing: failure(error))
                        return
                    }
                    guard (200..<300).contains(status) else {
                        continuation.resume(returning: (status, (try? Data(contentsOf: location)) ?? Data()))
                        return
                    }
                    do {
                        try? FileManager.default.removeItem(at: destination)
                        try FileManager.default.moveItem(at: location, to: destination)
                        continuation.resume(returning: (status, Data()))
                    } catch {
                        continuation.resume(throwing: MirrorError(
                            .ioFailure, "cannot keep a download from the relay in \(destination.path): \(error.localizedDescription)",
                            file: destination.path, underlying: error))
                    }
                }
            } else {
                let handler: @Sendable (Data?, URLResponse?, (any Error)?) -> Void = { data, response, error in
                    phase.withLock { if $0 == .running { $0 = .done } }
                    if let data, let status = (response as? HTTPURLResponse)?.statusCode {
                        continuation.resume(returning: (status, data))
                    } else {
                        continuation.resume(throwing: failure(error))
                    }
                }
                if case .file(let file) = payload {
                    task = session.uploadTask(with: request, fromFile: file, completionHandler: handler)
                } else {
                    task = session.dataTask(with: request, completionHandler: handler)
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

    /// Where a request sent by ``send(_:payload:downloadingTo:on:)`` is: answered (or
    /// failed), or given up at its timeout.
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
