import Foundation
import MagicMirror
import Synchronization

/// An in-memory database stores assets in memory, with the rules of `AssetDatabase`: a
/// commit that refers to an asset not stored in its zone is refused, a collection keeps
/// what live records refer to and what was stored but not yet referred to, and reads of an
/// asset that is not stored throw `MirrorError.Kind.notFound`.
///
/// ```swift
/// let database = InMemoryDatabase()
/// let photos = try await Mirror<Photo>(database: database)
/// let image = try await photos.storeAsset(Data("a picture".utf8))
/// photos.dataModel.append(Photo(image: image))
/// ```
///
/// Every writer of the database (``writer(named:)``) sees the same assets. The bytes are
/// held in memory, a file stored with `storeAsset(contentsOf:in:)` too; `fileURL(for:in:)`
/// writes the asset to a temporary file, removed when the database is.
extension InMemoryDatabase: AssetDatabase {
    /// Stores the bytes of a file as an asset of `zone` (see
    /// `AssetDatabase.storeAsset(contentsOf:in:)`); the bytes are held in memory.
    ///
    /// - Throws: `MirrorError.Kind.notFound` when `file` cannot be read.
    public func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw MirrorError(
                .notFound, "cannot read \(file.path) to store it as an asset", file: file.path, underlying: error)
        }
        return try await storeAsset(data, in: zone)
    }

    /// Stores `data` as an asset of `zone` (see `AssetDatabase.storeAsset(_:in:)`).
    public func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset {
        try zone.validate()
        try injectFailure(of: .commit, zone: zone, recordIDs: [])
        let asset = Asset(validDigest: SHA256.hex(of: data), size: data.count)
        store.contents.withLock { contents in
            if contents.assets[zone]?[asset.digest] == nil { contents.assets[zone, default: [:]][asset.digest] = data }
            contents.leasedAssets[zone, default: []].insert(asset.digest)
        }
        return asset
    }

    /// A temporary file that holds the asset's bytes (see `AssetDatabase.fileURL(for:in:)`).
    ///
    /// - Throws: `MirrorError.Kind.notFound` when the asset is not stored in `zone`.
    public func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL {
        let data = try storedBytes(of: asset, in: zone)
        return try store.assetFiles.file(for: asset, in: zone, bytes: data)
    }

    /// The asset's bytes in pieces of at most `chunkSize` bytes (see
    /// `AssetDatabase.contents(of:in:chunkSize:)`).
    public func contents(of asset: Asset, in zone: ZoneID, chunkSize: Int) -> AsyncThrowingStream<Data, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Data.self)
        do {
            let data = try storedBytes(of: asset, in: zone)
            let size = max(1, chunkSize)
            var start = data.startIndex
            while start < data.endIndex {
                let end = min(start + size, data.endIndex)
                continuation.yield(Data(data[start..<end]))
                start = end
            }
            continuation.finish()
        } catch {
            continuation.finish(throwing: error)
        }
        return stream
    }

    /// Removes the assets of `zone` that no live record refers to and that were referred to
    /// by a commit since they were stored (see `AssetDatabase.removeUnreferencedAssets(in:)`).
    @discardableResult
    public func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int {
        try zone.validate()
        return store.contents.withLock { contents in
            var referred = contents.leasedAssets[zone] ?? []
            for record in (contents.zones[zone] ?? ZoneState()).completeChangeSet.records {
                if let fields = record.fields { AssetReferences.collect(in: fields, into: &referred) }
            }
            let unreferenced = (contents.assets[zone] ?? [:]).keys.filter { !referred.contains($0) }
            for digest in unreferenced { contents.assets[zone]?[digest] = nil }
            return unreferenced.count
        }
    }

    private func storedBytes(of asset: Asset, in zone: ZoneID) throws(MirrorError) -> Data {
        try zone.validate()
        guard let data = store.contents.withLock({ $0.assets[zone]?[asset.digest] }), data.count == asset.size else {
            throw MirrorError(
                .notFound, "the asset \(asset.digest) is not stored in \(zone)",
                recordType: zone.recordType, scope: zone.scope)
        }
        return data
    }
}

extension InMemoryDatabase.Store {
    /// Refuses a commit whose saves refer to an asset that is not stored in `zone`
    /// (`notFound`), or hold an `"$asset"` value that is not a digest (`invalidRecord`).
    func checkAssetReferences(of operations: [RecordOperation], in zone: ZoneID) throws(MirrorError) {
        let digests = try AssetReferences.digests(in: operations)
        guard !digests.isEmpty else { return }
        let missing = contents.withLock { contents in digests.filter { contents.assets[zone]?[$0] == nil } }
        guard let first = missing.sorted().first else { return }
        let referring = operations.filter { operation in
            guard case .save(let fields) = operation.action else { return false }
            var found = Set<String>()
            AssetReferences.collect(in: fields, into: &found)
            return !found.isDisjoint(with: missing)
        }
        throw MirrorError(
            .notFound,
            "the asset \(first) is not stored in \(zone)\(missing.count > 1 ? " (nor \(missing.count - 1) more)" : ""): "
                + "store it in the record's zone before committing a record that refers to it",
            recordIDs: referring.map(\.recordID), recordType: zone.recordType, scope: zone.scope)
    }

    /// Ends the leases of the assets that `operations` refer to: collections keep them from
    /// now on only while a live record refers to them.
    func endAssetLeases(of operations: [RecordOperation], in zone: ZoneID) {
        var digests = Set<String>()
        for operation in operations {
            if case .save(let fields) = operation.action { AssetReferences.collect(in: fields, into: &digests) }
        }
        guard !digests.isEmpty else { return }
        contents.withLock { contents in contents.leasedAssets[zone]?.subtract(digests) }
    }
}

/// The temporary files of an in-memory database's assets, written on demand and removed
/// with the database.
final class AssetFiles: Sendable {
    private let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("MirrorTesting-assets-\(UUID().uuidString)", isDirectory: true)
    private let lock = Mutex(())

    /// The file of `asset` in `zone`, written with `bytes` unless it is there.
    func file(for asset: Asset, in zone: ZoneID, bytes: Data) throws(MirrorError) -> URL {
        var folder = directory.appendingPathComponent(zone.scope.rawValue, isDirectory: true)
        if let user = zone.user { folder.appendPathComponent(user, isDirectory: true) }
        folder.appendPathComponent(zone.recordType, isDirectory: true)
        let file = folder.appendingPathComponent(asset.digest)
        do {
            try lock.withLock { _ in
                guard (try? Data(contentsOf: file)) != bytes else { return }
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                try bytes.write(to: file, options: .atomic)
            }
        } catch {
            throw MirrorError(.ioFailure, "cannot write the asset's file \(file.path)", file: file.path, underlying: error)
        }
        return file
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }
}
