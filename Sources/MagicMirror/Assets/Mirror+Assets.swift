import Foundation

/// Assets: files that records carry (see <doc:Assets>).
extension Mirror {
    /// Stores the bytes of a file as an asset of this mirror's zone, to put in a record.
    ///
    /// The file is copied piece by piece (a file of any size is never held in memory) and,
    /// on a durable database, flushed to stable storage before this returns. Commit the
    /// record that refers to the asset afterwards: it can then never point at a file that a
    /// crash lost. Until that record is committed, the asset is kept from collection for as
    /// long as this process runs.
    ///
    /// ```swift
    /// let image = try await photos.storeAsset(contentsOf: pictureURL)
    /// photos.dataModel.append(Photo(caption: "Harbour", image: image))
    /// ```
    ///
    /// - Parameter file: A local file; it is copied, so it may be changed or removed afterwards.
    /// - Returns: The asset, to put in a field of a `Record`.
    /// - Throws: ``MirrorError/Kind/notFound`` when `file` cannot be read; an I/O kind when
    ///   the copy cannot be written (nothing is left behind); ``MirrorError/Kind/cancelled``
    ///   when the task is cancelled; ``MirrorError/Kind/unsupported`` when the database
    ///   does not store assets.
    public func storeAsset(contentsOf file: URL) async throws -> Asset {
        try await assetDatabase().storeAsset(contentsOf: file, in: zone)
    }

    /// Stores `data` as an asset of this mirror's zone, to put in a record.
    ///
    /// See ``storeAsset(contentsOf:)``; prefer it for large files.
    ///
    /// - Parameter data: The asset's bytes.
    /// - Returns: The asset, to put in a field of a `Record`.
    /// - Throws: An I/O kind when the file cannot be written (nothing is left behind);
    ///   ``MirrorError/Kind/unsupported`` when the database does not store assets.
    public func storeAsset(_ data: Data) async throws -> Asset {
        try await assetDatabase().storeAsset(data, in: zone)
    }

    /// A local file holding the bytes of `asset`, for APIs that take a file URL.
    ///
    /// The file exists and has the asset's size when this returns; its bytes are not
    /// checked (``data(for:)`` and ``contents(of:chunkSize:)`` check them). Do not write to
    /// it: it is shared by every record that carries the same bytes.
    ///
    /// - Parameter asset: An asset of a record of this mirror.
    /// - Returns: The file's URL.
    /// - Throws: ``MirrorError/Kind/notFound`` when another program removed the file,
    ///   ``MirrorError/Kind/corruptEntry`` when it changed its size or replaced it.
    public func fileURL(for asset: Asset) async throws -> URL {
        try await assetDatabase().fileURL(for: asset, in: zone)
    }

    /// The bytes of `asset`, read whole and checked against its digest.
    ///
    /// For large assets, read ``contents(of:chunkSize:)`` piece by piece instead.
    ///
    /// - Parameter asset: An asset of a record of this mirror.
    /// - Returns: The asset's bytes.
    /// - Throws: ``MirrorError/Kind/notFound`` when another program removed the file,
    ///   ``MirrorError/Kind/corruptEntry`` when it changed it.
    public func data(for asset: Asset) async throws -> Data {
        // The size comes from a record, which anyone may have written: reserve no more than
        // a reasonable piece up front; the read checks the size against the file.
        var data = Data(capacity: min(asset.size, 1 << 26))
        for try await piece in contents(of: asset) { data.append(piece) }
        return data
    }

    /// The bytes of `asset`, piece by piece, so that an asset of any size can be read
    /// with little memory.
    ///
    /// The stream checks the bytes against the asset's digest as they go by: when they do
    /// not match (another program changed the file), it throws
    /// ``MirrorError/Kind/corruptEntry`` after the last piece; discard what you read then.
    ///
    /// ```swift
    /// for try await piece in photos.contents(of: photo.image) {
    ///     try output.write(contentsOf: piece)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - asset: An asset of a record of this mirror.
    ///   - chunkSize: The largest piece, in bytes; 1 MiB by default.
    /// - Returns: The pieces, in order. It throws ``MirrorError/Kind/notFound`` first when
    ///   the file is missing.
    public func contents(of asset: Asset, chunkSize: Int = 1 << 20) -> AsyncThrowingStream<Data, any Error> {
        do {
            return try assetDatabase().contents(of: asset, in: zone, chunkSize: chunkSize)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
    }

    /// Removes the asset files of this mirror's zone that no record refers to any more.
    ///
    /// Safe while other mirrors and processes work: it keeps every asset a live record
    /// refers to, and every asset a running process stored and has not committed a record
    /// for yet. It also removes what writers that died left behind (files they were
    /// copying, assets they stored but never committed a record for).
    ///
    /// - Returns: How many asset files were removed.
    /// - Throws: A ``MirrorError`` when the zone cannot be read; nothing is removed then.
    ///   ``MirrorError/Kind/unsupported`` when the database does not store assets.
    @discardableResult
    public func removeUnreferencedAssets() async throws -> Int {
        try await assetDatabase().removeUnreferencedAssets(in: zone)
    }

    /// The database as an ``AssetDatabase``.
    private func assetDatabase() throws(MirrorError) -> any AssetDatabase {
        guard let database = database as? any AssetDatabase else {
            throw MirrorError(
                .unsupported,
                "\(type(of: database)) does not store assets; use a JSONFileDatabase",
                recordType: zone.recordType, scope: zone.scope)
        }
        return database
    }
}
