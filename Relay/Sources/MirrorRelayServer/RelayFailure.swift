import Foundation
import HTTPTypes
import Hummingbird
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import NIOHTTP1

/// An error the relay answers with: an HTTP status and the protocol's JSON body
/// `{ "error": { "code": "...", "message": "..." } }`.
struct RelayFailure: Error, Sendable {
    let status: HTTPResponse.Status
    let detail: RelayWire.ErrorBody.Detail
    /// When to send the request again, for a 503 the relay expects to pass soon.
    var retryAfterSeconds: Int?

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        detail = RelayWire.ErrorBody.Detail(code: code, message: message, nothingStored: true)
        self.retryAfterSeconds = retryAfterSeconds
    }

    static func unauthorized(_ message: String) -> RelayFailure { RelayFailure(.unauthorized, "unauthorized", message) }
    static func badRequest(_ message: String) -> RelayFailure { RelayFailure(.badRequest, "badRequest", message) }

    /// The answer to any error a request met: a ``RelayFailure`` as it is, a `MirrorError`
    /// by its kind, anything else as the relay's own failure (500, without its details).
    static func response(for error: any Error) -> Response {
        let failure: RelayFailure
        switch error {
        case let error as RelayFailure:
            failure = error
        case let error as MirrorError:
            failure = RelayFailure(error)
        case let error as any HTTPResponseError where error.status == .notFound:
            failure = RelayFailure(.notFound, "notFound", "no such request; the protocol's requests are under /v1/")
        case let error as any HTTPResponseError where error.status == .contentTooLarge:
            failure = RelayFailure(.contentTooLarge, "payloadTooLarge", "the request's body is too large")
        case let error as any HTTPResponseError:
            failure = RelayFailure(error.status, "badRequest", "the request was refused (\(error.status.code))")
        case let error as HTTPParserError:
            // Met while reading the body: a transfer coding or chunk the parser refused.
            failure = RelayFailure.badRequest("the request is not HTTP/1.1 the relay reads (\(error))")
        default:
            failure = RelayFailure(.internalServerError, "unavailable", "the relay failed to serve the request")
        }
        var response = json(RelayWire.ErrorBody(failure.detail), status: failure.status)
        if let seconds = failure.retryAfterSeconds { response.headers[.retryAfter] = "\(seconds)" }
        return response
    }

    /// A `MirrorError` as an answer: client errors 4xx, the database's state 503.
    init(_ error: MirrorError) {
        let status: HTTPResponse.Status = switch error.kind {
        case .invalidName, .invalidRecord, .encodingFailed, .decodingFailed: .badRequest
        case .permissionDenied, .accountUnavailable: .forbidden
        case .notFound: .notFound
        case .conflict, .refused: .conflict
        case .unsupported, .unsupportedFormat: .badRequest
        default: .serviceUnavailable
        }
        self.status = status
        detail = RelayWire.ErrorBody.Detail(
            code: error.kind.description, message: error.message,
            nothingStored: error.nothingStored || status.code < 500 ? true : nil,
            recordIDs: error.recordIDs.isEmpty ? nil : error.recordIDs)
    }
}

/// `value` as a JSON answer.
func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .withoutEscapingSlashes
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return Response(
        status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
}
