#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import Foundation
import Logging
import MagicMirror
import PostgresNIO

/// Assets on the server: each asset's bytes are rows of `magicmirror.asset_chunks`, named
/// by zone and digest in `magicmirror.assets` (see the article "Running on PostgreSQL").
extension PostgreSQLDatabase: AssetDatabase {
    /// Stores the bytes of a file as an asset of `zone`, streaming them to the server in
    /// chunks of ``AssetRows/chunkSize`` bytes, in one transaction: the asset is there whole
    /// or not at all, and the file is never held in memory as a whole.
    ///
    /// Until a record that refers to the asset is committed through this database, the
    /// asset is kept from collection for as long as this database is open (it holds an
    /// advisory lock on a connection of its own for that).
    ///
    /// - Parameters:
    ///   - file: A local file to copy.
    ///   - zone: The zone whose records will refer to the asset.
    /// - Returns: The asset, to put in a record of `zone`.
    /// - Throws: ``MirrorError/Kind/notFound`` when `file` cannot be read;
    ///   ``MirrorError/Kind/permissionDenied`` for another role's private zone;
    ///   ``MirrorError/Kind/unavailable`` when the server cannot be reached;
    ///   ``MirrorError/Kind/cancelled`` when the task is cancelled. Nothing is stored then.
    public func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset {
        try zone.validate()
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: file)
        } catch {
            throw MirrorError(
                .notFound, "cannot read \(file.path) to store it as an asset: \(error.localizedDescription)",
                recordType: zone.recordType, scope: zone.scope, file: file.path, underlying: error)
        }
        defer { try? handle.close() }
        return try await storeAsset(in: zone) {
            do {
                return try handle.read(upToCount: AssetRows.chunkSize) ?? Data()
            } catch {
                throw MirrorError(
                    .ioFailure, "cannot read \(file.path) to store it as an asset: \(error.localizedDescription)",
                    recordType: zone.recordType, scope: zone.scope, file: file.path, underlying: error)
            }
        }
    }

    /// Stores `data` as an asset of `zone`; see ``storeAsset(contentsOf:in:)``.
    ///
    /// - Parameters:
    ///   - data: The asset's bytes.
    ///   - zone: The zone whose records will refer to the asset.
    /// - Returns: The asset, to put in a record of `zone`.
    /// - Throws: What ``storeAsset(contentsOf:in:)`` throws, but for reading a file.
    public func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset {
        try zone.validate()
        var offset = data.startIndex
        return try await storeAsset(in: zone) {
            let end = min(offset + AssetRows.chunkSize, data.endIndex)
            defer { offset = end }
            return data[offset..<end]
        }
    }

    /// A local file that holds the asset's bytes: a copy downloaded (and checked against the
    /// asset's digest) into a directory of this database, kept until ``close()``.
    ///
    /// - Parameters:
    ///   - asset: An asset of a record of `zone`.
    ///   - zone: The zone whose records refer to it.
    /// - Returns: The file's URL; do not write to it.
    /// - Throws: ``MirrorError/Kind/notFound`` when the zone holds no such asset (or the
    ///   role cannot see it); ``MirrorError/Kind/corruptEntry`` when the stored bytes are
    ///   not the asset's.
    public func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL {
        try zone.validate()
        // Asks the server first: the zone must hold the asset, and the role must see it.
        let download = AssetDownload(
            asset: asset, zone: zone, chunkSize: AssetRows.chunkSize, link: link, logger: logger)
        try await download.locate()
        let directory = try assetCache.directory()
        let file = directory.appendingPathComponent(asset.digest)
        if let size = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? NSNumber,
           size.intValue == asset.size {
            return file
        }
        let partial = directory.appendingPathComponent("\(asset.digest).\(UUID().uuidString).partial")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil),
              let output = try? FileHandle(forWritingTo: partial)
        else {
            throw MirrorError(
                .ioFailure, "cannot write \(partial.path) to hold \(asset)", recordType: zone.recordType,
                scope: zone.scope, file: partial.path)
        }
        do {
            while let piece = try await download.next() { try output.write(contentsOf: piece) }
            try output.close()
            // Renamed over any older copy at once: a file with the asset's name is whole.
            guard rename(partial.path, file.path) == 0 else {
                throw MirrorError(
                    .ioFailure, "cannot rename \(partial.path) to \(file.path): \(String(cString: strerror(errno)))",
                    recordType: zone.recordType, scope: zone.scope, file: file.path)
            }
        } catch {
            try? output.close()
            try? FileManager.default.removeItem(at: partial)
            if let error = error as? MirrorError { throw error }
            throw MirrorError(
                .ioFailure, "cannot write \(file.path) to hold \(asset): \(error.localizedDescription)",
                recordType: zone.recordType, scope: zone.scope, file: file.path, underlying: error)
        }
        return file
    }

    /// The asset's bytes, read from the server one chunk at a time and handed out in pieces
    /// of at most `chunkSize` bytes; the stream throws ``MirrorError/Kind/corruptEntry``
    /// after the last piece when the bytes are not the asset's, and
    /// ``MirrorError/Kind/notFound`` first when the zone holds no such asset.
    ///
    /// - Parameters:
    ///   - asset: An asset of a record of `zone`.
    ///   - zone: The zone whose records refer to it.
    ///   - chunkSize: The largest piece, in bytes.
    /// - Returns: The pieces, in order.
    public func contents(
        of asset: Asset, in zone: ZoneID, chunkSize: Int
    ) -> AsyncThrowingStream<Data, any Error> {
        let download = AssetDownload(
            asset: asset, zone: zone, chunkSize: max(1, chunkSize), link: link, logger: logger)
        return AsyncThrowingStream { try await download.next() }
    }

    /// Removes the assets of `zone` that no live record of the zone refers to and that no
    /// open database (in any process, on any machine) stored without committing a record
    /// that refers to them yet.
    ///
    /// It runs in one transaction that locks the zone's row, as commits do, so a commit
    /// either comes first (and its references keep its assets) or comes after and finds the
    /// assets removed (and is refused with ``MirrorError/Kind/notFound``).
    ///
    /// - Parameter zone: The zone to collect.
    /// - Returns: How many assets were removed.
    /// - Throws: A ``MirrorError``; nothing is removed then.
    @discardableResult
    public func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int {
        try zone.validate()
        let key = ZoneKey(zone)
        let logger = logger
        do {
            let link = link
            return try await withDeadline(serverDeadline, "collecting the assets of \(zone)") {
                try await link.withTransaction(logger: logger) { connection in
                    try await AssetRows.collect(key, on: connection, logger: logger)
                }
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "collecting the assets of \(zone)", zone: zone)
        }
    }

    /// Stores the chunks `next` returns (an empty one ends them) as an asset of `zone`.
    private func storeAsset(in zone: ZoneID, next: () throws -> Data) async throws -> Asset {
        let key = ZoneKey(zone)
        let logger = logger
        // A relay's upload is held for its client's writer, whose commits release it.
        let writer = PostgreSQLActingUser.current?.writerID ?? writerID
        let base = baseGeneration
        do {
            // The process's lock, shared by every database of the link.
            let lockKey = try await link.assetPresence().key(for: writer)
            // Not through the link's check: `next` is not `Sendable`. A relay's request acts
            // as its user here too (never as the relay's own role).
            let acting = PostgreSQLActingUser.current
            return try await link.client.withTransaction(logger: logger) { connection in
                try await acting?.enter(on: connection, logger: logger)
                let upload = try await AssetRows.Upload(
                    key, baseGeneration: base, zone: zone, on: connection, logger: logger)
                var hash = SHA256()
                var size = 0
                while true {
                    if Task.isCancelled {
                        throw MirrorError(
                            .cancelled, "storing an asset in \(zone) was cancelled; nothing was stored",
                            recordType: zone.recordType, scope: zone.scope)
                    }
                    let chunk = try next()
                    if chunk.isEmpty { break }
                    hash.update(data: chunk)
                    size += chunk.count
                    try await withDeadline(serverDeadline, "storing an asset in \(zone)") {
                        try await upload.append(chunk, on: connection, logger: logger)
                    }
                }
                let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
                try await upload.finish(digest: digest, size: size, writer: writer, lockKey: lockKey, on: connection, logger: logger)
                return try AssetRows.asset(digest: digest, size: size)
            }
        } catch {
            throw PostgreSQLErrors.mirrorError(error, "storing an asset in \(zone)", zone: zone)
        }
    }
}
