import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore

/// Assets, streamed both ways (see the article "The relay"): an upload's body is written to a
/// temporary file as it arrives, never held whole, then stored from that file as the
/// subject; a download's answer is the asset's pieces as the database reads them, as the
/// subject.
extension RelayRoutes {
    /// The largest piece of an asset the relay holds while it answers a download.
    static let assetPieceBytes = 64 * 1024

    func addAssets(to router: Router<RelayRequestContext>) {
        router.post("v1/assets/store") { request, _ in try await storeAsset(request) }
        router.post("v1/assets/contents") { request, _ in try await assetContents(request) }
        router.post("v1/assets/collect") { request, _ in
            try await serve(request, RelayWire.CollectRequest.self) { body, database, subject in
                try Self.checkOwn(body.zone, subject: subject, "collect the assets of")
                return json(RelayWire.Collected(removed: try await database.removeUnreferencedAssets(in: body.zone)))
            }
        }
    }

    /// `/v1/assets/store?zone=…&writer=…`: the body, at most ``maximumAssetBytes``, to a temporary
    /// file, then to the database as the subject. Another user's private or shared zone, a
    /// missing zone and a declared length over the limit are refused before a byte is read.
    private func storeAsset(_ request: Request) async throws -> Response {
        let subject = try await tokens.subject(authorization: request.headers[.authorization])
        let query = request.uri.query
        guard let zoneJSON = RelayWire.queryItem("zone", in: query),
            let zone = try? JSONDecoder().decode(ZoneID.self, from: Data(zoneJSON.utf8))
        else {
            throw RelayFailure.badRequest("an upload names its zone in its query: zone= and the zone as JSON")
        }
        try zone.validate()
        guard let writer = RelayWire.queryItem("writer", in: query), (1...255).contains(writer.utf8.count),
            writer.unicodeScalars.allSatisfy({ $0.value >= 0x20 })
        else {
            throw RelayFailure.badRequest("an upload names its writer in its query: writer= and 1 to 255 bytes without control characters")
        }
        try Self.checkOwn(zone, subject: subject, "store an asset in")
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > maximumAssetBytes {
            throw tooLarge()
        }
        let database = try await users.database(for: subject)
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("mirror-relay-upload-" + UUID().uuidString.lowercased())
        defer { try? FileManager.default.removeItem(at: file) }
        try await receive(request.body, into: file)
        // The asset is held for the client's writer (bound to the subject as a commit binds
        // it) until a commit of that writer refers to it.
        let claim = CommitClaim(subject: subject, writer: writer, key: nil, body: Data())
        do {
            let asset = try await PostgreSQLActingUser.$current.withValue(
                PostgreSQLActingUser(role: subject, writerID: writer, beforeRole: claim.record)
            ) { try await database.storeAsset(contentsOf: file, in: zone) }
            return json(asset)
        } catch where claim.writerRefused {
            throw RelayFailure(
                .forbidden, "writerTaken", "this writer id is another user's: each writer id belongs to the user who first used it")
        }
    }

    /// Writes `body` to `file` as it arrives; more than ``maximumAssetBytes`` is a 413 (the
    /// server then reads the rest of the body and drops it, so the client reads the answer).
    private func receive(_ body: RequestBody, into file: URL) async throws {
        guard FileManager.default.createFile(atPath: file.path, contents: nil),
            let handle = try? FileHandle(forWritingTo: file)
        else {
            logger.error("cannot write an upload to \(file.path)")
            throw RelayFailure(.internalServerError, "unavailable", "the relay cannot hold an upload now; nothing was stored")
        }
        defer { try? handle.close() }
        var received = 0
        for try await buffer in body {
            received += buffer.readableBytes
            guard received <= maximumAssetBytes else { throw tooLarge() }
            try handle.write(contentsOf: Data(buffer.readableBytesView))
        }
    }

    private func tooLarge() -> RelayFailure {
        RelayFailure(
            .contentTooLarge, "payloadTooLarge",
            "an asset is at most \(maximumAssetBytes) bytes on this relay (--max-asset-bytes); nothing was stored")
    }

    /// `/v1/assets/contents`: the first piece is read before the answer starts, so that an
    /// asset the zone does not hold for the subject is a 404; the rest is streamed. With
    /// `cached`, the answer is a 204 once the asset is found.
    private func assetContents(_ request: Request) async throws -> Response {
        let subject = try await tokens.subject(authorization: request.headers[.authorization])
        let body = try await withBody(request, RelayWire.AssetRequest.self, limit: Self.maximumRequestBytes, subject: subject) { $0 }
        try body.zone.validate()
        let database = try await users.database(for: subject)
        let acting = PostgreSQLActingUser(role: subject)
        let pieces = RelayAssetPieces(database.contents(of: body.asset, in: body.zone, chunkSize: Self.assetPieceBytes))
        let first: Data?
        do {
            first = try await PostgreSQLActingUser.$current.withValue(acting) { try await pieces.next() }
        } catch let error as MirrorError where error.kind == .corruptEntry {
            // Before the first piece, bytes that are not the asset's mean a size the request
            // got wrong (a digest names one content): no such asset, as for any other.
            throw RelayFailure(MirrorError(
                .notFound, "\(body.asset) is not stored in \(body.zone): \(error.message)",
                recordType: body.zone.recordType, scope: body.zone.scope))
        }
        if body.cached == true { return Response(status: .noContent) }
        return Response(
            status: .ok, headers: [.contentType: "application/octet-stream"],
            body: ResponseBody(contentLength: body.asset.size) { writer in
                if let first { try await writer.write(ByteBuffer(bytes: first)) }
                // The answer is written after the handler returned: act as the subject again.
                try await PostgreSQLActingUser.$current.withValue(acting) {
                    while let piece = try await pieces.next() { try await writer.write(ByteBuffer(bytes: piece)) }
                }
                try await writer.finish(nil)
            })
    }
}

/// An asset's pieces, read first by a request's handler and then by its answer's writer,
/// which runs after the handler returned: one task at a time, never two at once, which is why
/// the unchecked `Sendable` is safe.
final class RelayAssetPieces: @unchecked Sendable {
    private var iterator: AsyncThrowingStream<Data, any Error>.AsyncIterator

    init(_ stream: AsyncThrowingStream<Data, any Error>) { iterator = stream.makeAsyncIterator() }

    func next() async throws -> Data? { try await iterator.next() }
}
