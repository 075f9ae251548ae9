import Crypto
import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// Reads one asset from the server, a chunk row at a time, and hands it out in pieces of at
/// most `chunkSize` bytes, checking its size and digest: at most a piece and a chunk are in
/// memory at once.
actor AssetDownload {
    private let asset: Asset
    private let zone: ZoneID
    private let chunkSize: Int
    private let link: ServerLink
    private let logger: Logger

    private var content: Int?
    private var nextChunk = 0
    private var buffer = Data()
    private var received = 0
    private var hash = SHA256()
    private var finished = false

    init(asset: Asset, zone: ZoneID, chunkSize: Int, link: ServerLink, logger: Logger) {
        self.asset = asset
        self.zone = zone
        self.chunkSize = chunkSize
        self.link = link
        self.logger = logger
    }

    /// Finds the asset on the server.
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` when the zone holds no such asset or the role
    ///   cannot see it; ``MirrorError/Kind/corruptEntry`` when it is stored with another size.
    func locate() async throws {
        guard content == nil else { return }
        let key = ZoneKey(zone)
        let (logger, digest) = (logger, asset.digest)
        let link = link
        let found: (size: Int, content: Int)?
        do {
            found = try await withDeadline(serverDeadline, "reading \(asset) in \(zone)") {
                try await link.withConnection { connection in
                    try await AssetRows.locate(digest, in: key, on: connection, logger: logger)
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading \(asset) in \(zone)", zone: zone)
        }
        guard let found else {
            throw MirrorError(
                .notFound,
                "\(asset) is not stored in \(zone) (it was removed, never stored there, or the role cannot "
                    + "see it). The records are unchanged.",
                recordType: zone.recordType, scope: zone.scope)
        }
        guard found.size == asset.size else { throw changed("is stored with \(found.size) bytes, not \(asset.size)") }
        content = found.content
    }

    /// The next piece, or `nil` after the last one once the bytes matched the asset.
    func next() async throws -> Data? {
        guard !finished else { return nil }
        do {
            try await locate()
            while buffer.count < chunkSize, received < asset.size {
                guard let chunk = try await fetch(nextChunk) else {
                    throw changed("has \(received) bytes on the server, not \(asset.size)")
                }
                nextChunk += 1
                received += chunk.count
                guard received <= asset.size else { throw changed("has more than \(asset.size) bytes on the server") }
                hash.update(data: chunk)
                buffer.append(chunk)
            }
            if buffer.isEmpty {
                finished = true
                let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
                guard digest == asset.digest else {
                    throw changed("holds other bytes on the server than the asset (its digest differs)")
                }
                return nil
            }
            let piece = buffer.prefix(chunkSize)
            buffer = Data(buffer.dropFirst(piece.count))
            return Data(piece)
        } catch {
            finished = true
            throw error
        }
    }

    private func fetch(_ number: Int) async throws -> Data? {
        guard let content else { return nil }
        let (link, logger) = (link, logger)
        do {
            return try await withDeadline(serverDeadline, "reading \(asset) in \(zone)") {
                try await link.withConnection { connection in
                    try await AssetRows.chunk(number, of: content, on: connection, logger: logger)
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "reading \(asset) in \(zone)", zone: zone)
        }
    }

    private func changed(_ what: String) -> MirrorError {
        MirrorError(
            .corruptEntry, "\(asset) \(what); it was changed behind MagicMirror's back. Discard what was read.",
            recordType: zone.recordType, scope: zone.scope)
    }
}
