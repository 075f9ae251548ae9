import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import MagicMirror
import Synchronization

// Assets through the relay, streamed both ways: an upload is the request's body, streamed
// from the file (`/v1/assets/store`); a download is the answer's body, streamed into a file
// of this database's cache directory (`/v1/assets/contents`), and checked here against the
// asset's size and digest. The relay stores and reads as the token's subject.

extension RelayDatabase: AssetDatabase {
    /// How long an upload or a download may take.
    static let assetTimeout: TimeInterval = 600

    /// Stores the bytes of a file as an asset of `zone`: the file is streamed to the relay as
    /// the request's body, never held in memory as a whole.
    ///
    /// - Parameters:
    ///   - file: A local file to copy.
    ///   - zone: The zone whose records will refer to the asset.
    /// - Returns: The asset, to put in a record of `zone`.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/notFound`` when `file` cannot be read,
    ///   ``MirrorError/Kind/invalidRecord`` for a file larger than the relay accepts (413),
    ///   the relay's error otherwise; nothing is stored then.
    public func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset {
        try zone.validate()
        do {
            try FileHandle(forReadingFrom: file).close()
        } catch {
            throw MirrorError(
                .notFound, "cannot read \(file.path) to store it as an asset: \(error.localizedDescription)",
                recordType: zone.recordType, scope: zone.scope, file: file.path, underlying: error)
        }
        return try await transport.upload(
            "assets/store", query: try RelayWire.assetQuery(zone: zone, writerID: writerID), .file(file), timeout: Self.assetTimeout, as: Asset.self)
    }

    /// Stores `data` as an asset of `zone`; see ``storeAsset(contentsOf:in:)``.
    public func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset {
        try zone.validate()
        return try await transport.upload(
            "assets/store", query: try RelayWire.assetQuery(zone: zone, writerID: writerID), .data(data, contentType: "application/octet-stream"),
            timeout: Self.assetTimeout, as: Asset.self)
    }

    /// A local file that holds the asset's bytes, in this database's cache directory (kept
    /// until the database is released). The relay checks every time that the zone holds the
    /// asset for the user; the bytes are downloaded once, streamed to disk, and checked
    /// against the asset's size and digest.
    ///
    /// - Returns: The file's URL; do not write to it.
    /// - Throws: ``MirrorError/Kind/notFound`` when the zone holds no such asset (or the user
    ///   cannot see it), ``MirrorError/Kind/corruptEntry`` when the bytes are not the asset's.
    public func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL {
        try zone.validate()
        let directory = try assetCache.directory()
        let file = directory.appendingPathComponent(asset.digest)
        let held = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? NSNumber
        let partial = directory.appendingPathComponent("\(asset.digest).\(UUID().uuidString).partial")
        defer { try? FileManager.default.removeItem(at: partial) }
        let downloaded = try await transport.download(
            "assets/contents", RelayWire.AssetRequest(zone: zone, asset: asset, cached: held?.intValue == asset.size),
            to: partial, timeout: Self.assetTimeout)
        guard downloaded else { return file }
        let handle = try RelayAssetFile.open(partial, zone: zone)
        var check = RelayAssetCheck(asset: asset, zone: zone)
        do {
            while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { try check.add(piece) }
            try handle.close()
            try check.finish()
        } catch {
            try? handle.close()
            throw error
        }
        // Renamed over any older copy at once: a file with the asset's name is whole.
        guard rename(partial.path, file.path) == 0 else {
            throw MirrorError(
                .ioFailure, "cannot rename \(partial.path) to \(file.path): \(String(cString: strerror(errno)))",
                recordType: zone.recordType, scope: zone.scope, file: file.path)
        }
        return file
    }

    /// The asset's bytes in pieces of at most `chunkSize` bytes: downloaded from the relay
    /// (streamed to a file of the cache directory, removed once read) for each stream, then
    /// read from that file. The stream throws ``MirrorError/Kind/notFound`` first when the
    /// zone holds no such asset, and ``MirrorError/Kind/corruptEntry`` after the last piece
    /// when the bytes are not the asset's.
    public func contents(of asset: Asset, in zone: ZoneID, chunkSize: Int) -> AsyncThrowingStream<Data, any Error> {
        let reader = RelayAssetReader(
            asset: asset, zone: zone, chunkSize: max(1, chunkSize), transport: transport, cache: assetCache)
        return AsyncThrowingStream { try await reader.next() }
    }

    /// Removes the asset files of `zone` that nothing refers to any more, on the server, as
    /// the user (see ``AssetDatabase``).
    ///
    /// - Returns: How many assets were removed.
    @discardableResult
    public func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int {
        try zone.validate()
        return try await transport.post("assets/collect", RelayWire.CollectRequest(zone: zone), as: RelayWire.Collected.self).removed
    }
}

/// A directory of downloaded assets, made on first use and removed with its database.
final class RelayAssetCache: Sendable {
    private let made = Mutex<URL?>(nil)

    /// The directory, made now if it is not there.
    func directory() throws -> URL {
        try made.withLock { made in
            if let made { return made }
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("magicmirror-relay-assets-" + UUID().uuidString.lowercased())
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw MirrorError(
                    .ioFailure, "cannot make a directory for assets downloaded from the relay: \(error.localizedDescription)",
                    file: directory.path, underlying: error)
            }
            made = directory
            return directory
        }
    }

    /// Removes the directory and everything in it.
    func remove() {
        if let directory = made.withLock({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}

/// Checks bytes read in pieces against an asset: no more than its size, and its digest.
struct RelayAssetCheck {
    let asset: Asset
    let zone: ZoneID
    private var hash = SHA256()
    private var received = 0

    init(asset: Asset, zone: ZoneID) { (self.asset, self.zone) = (asset, zone) }

    mutating func add(_ piece: Data) throws {
        received += piece.count
        guard received <= asset.size else { throw changed("has more than \(asset.size) bytes on the relay") }
        piece.withUnsafeBytes { hash.update($0) }
    }

    mutating func finish() throws {
        guard received == asset.size else { throw changed("has \(received) bytes on the relay, not \(asset.size)") }
        guard hash.finish() == asset.digest else {
            throw changed("holds other bytes on the relay than the asset (its digest differs)")
        }
    }

    private func changed(_ what: String) -> MirrorError {
        MirrorError(
            .corruptEntry, "\(asset) \(what); it was changed behind MagicMirror's back. Discard what was read.",
            recordType: zone.recordType, scope: zone.scope)
    }
}

enum RelayAssetFile {
    /// A downloaded file, open for reading.
    static func open(_ file: URL, zone: ZoneID) throws -> FileHandle {
        do {
            return try FileHandle(forReadingFrom: file)
        } catch {
            throw MirrorError(
                .ioFailure, "cannot read \(file.path), downloaded from the relay: \(error.localizedDescription)",
                recordType: zone.recordType, scope: zone.scope, file: file.path, underlying: error)
        }
    }
}

/// One stream of an asset's contents: the download on the first piece, then the file read a
/// piece at a time and checked; the file is removed at the end, or at the first error.
actor RelayAssetReader {
    private let asset: Asset
    private let zone: ZoneID
    private let chunkSize: Int
    private let transport: RelayTransport
    private let cache: RelayAssetCache
    private var file: (url: URL, handle: FileHandle)?
    private var check: RelayAssetCheck
    private var finished = false

    init(asset: Asset, zone: ZoneID, chunkSize: Int, transport: RelayTransport, cache: RelayAssetCache) {
        (self.asset, self.zone, self.chunkSize, self.transport, self.cache) = (asset, zone, chunkSize, transport, cache)
        check = RelayAssetCheck(asset: asset, zone: zone)
    }

    deinit {
        // A stream left before its end.
        if let file {
            try? file.handle.close()
            try? FileManager.default.removeItem(at: file.url)
        }
    }

    /// The next piece, or `nil` after the last one once the bytes matched the asset.
    func next() async throws -> Data? {
        guard !finished else { return nil }
        do {
            let handle = try await opened()
            let piece = try handle.read(upToCount: chunkSize) ?? Data()
            if piece.isEmpty {
                end()
                try check.finish()
                return nil
            }
            try check.add(piece)
            return piece
        } catch {
            end()
            throw error
        }
    }

    private func opened() async throws -> FileHandle {
        if let file { return file.handle }
        try zone.validate()
        let url = try cache.directory().appendingPathComponent("\(asset.digest).\(UUID().uuidString).reading")
        do {
            _ = try await transport.download(
                "assets/contents", RelayWire.AssetRequest(zone: zone, asset: asset, cached: false), to: url,
                timeout: RelayDatabase.assetTimeout)
            let handle = try RelayAssetFile.open(url, zone: zone)
            file = (url, handle)
            return handle
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw error
        }
    }

    private func end() {
        finished = true
        if let file {
            try? file.handle.close()
            try? FileManager.default.removeItem(at: file.url)
        }
        file = nil
    }
}
