import Foundation
import MagicMirror

/// A temporary database stores assets through its JSON-file ``TemporaryDatabase/database``,
/// so code that stores and reads assets through a mirror can be tested on it.
extension TemporaryDatabase: AssetDatabase {
    /// Stores through ``database`` (see `AssetDatabase.storeAsset(contentsOf:in:)`).
    public func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset {
        try await database.storeAsset(contentsOf: file, in: zone)
    }

    /// Stores through ``database`` (see `AssetDatabase.storeAsset(_:in:)`).
    public func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset {
        try await database.storeAsset(data, in: zone)
    }

    /// Reads through ``database`` (see `AssetDatabase.fileURL(for:in:)`).
    public func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL {
        try await database.fileURL(for: asset, in: zone)
    }

    /// Reads through ``database`` (see `AssetDatabase.contents(of:in:chunkSize:)`).
    public func contents(
        of asset: Asset, in zone: ZoneID, chunkSize: Int
    ) -> AsyncThrowingStream<Data, any Error> {
        database.contents(of: asset, in: zone, chunkSize: chunkSize)
    }

    /// Collects through ``database`` (see `AssetDatabase.removeUnreferencedAssets(in:)`).
    @discardableResult
    public func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int {
        try await database.removeUnreferencedAssets(in: zone)
    }
}
