import Foundation

/// A ``RecordDatabase`` that also stores the files records carry (``Asset``s).
///
/// ``JSONFileDatabase`` is one, and so are the PostgreSQL adapter's `PostgreSQLDatabase` and
/// MirrorTesting's `InMemoryDatabase` and `TemporaryDatabase`. `Mirror`'s asset methods
/// (``Mirror/storeAsset(contentsOf:)`` and the others) call these methods with the mirror's
/// zone; use a mirror unless you work with a database directly. On a database that is not
/// an `AssetDatabase`, the mirror's asset methods throw ``MirrorError/Kind/unsupported``.
///
/// ## Implementation requirements
///
/// `AssetDatabaseConformance` in the MirrorTesting module checks each point; run it on
/// your implementation as you run `RecordDatabaseConformance`.
///
/// 1. **Before the record.** When a store returns, the file is durable (for a durable
///    database); a commit whose saved fields refer to an asset (a JSON object with the key
///    `"$asset"`) that is not stored in the zone is refused with
///    ``MirrorError/Kind/notFound`` and stores nothing. A `"$asset"` value that is not a
///    digest is refused with ``MirrorError/Kind/invalidRecord``.
/// 2. **Collection.** ``removeUnreferencedAssets(in:)`` removes only files that no live
///    record of the zone refers to and that no live writer (in any process) stored without
///    committing a record that refers to them yet.
/// 3. **Reads.** Reads check the bytes against the asset (size; digest where the bytes are
///    read) and report a missing file with ``MirrorError/Kind/notFound`` and a changed one
///    with ``MirrorError/Kind/corruptEntry``. They never follow a path out of the database.
public protocol AssetDatabase: RecordDatabase {
    /// Stores the bytes of a file as an asset of `zone`, streaming them: the file is never
    /// held in memory as a whole.
    ///
    /// - Parameters:
    ///   - file: A local file to copy.
    ///   - zone: The zone whose records will refer to the asset.
    /// - Returns: The asset, to put in a record of `zone`.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/notFound`` when `file` cannot be
    ///   read, an I/O kind when the copy cannot be written (nothing is left behind then).
    func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset

    /// Stores `data` as an asset of `zone`.
    ///
    /// - Returns: The asset, to put in a record of `zone`.
    /// - Throws: A ``MirrorError`` when it cannot be written (nothing is left behind then).
    func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset

    /// A local file that holds the asset's bytes, after checking that it exists and has the
    /// asset's size.
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` when the file is missing,
    ///   ``MirrorError/Kind/corruptEntry`` when it has another size.
    func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL

    /// The asset's bytes, read in chunks of at most `chunkSize` bytes; the stream throws
    /// ``MirrorError/Kind/corruptEntry`` after the last chunk when the bytes do not have
    /// the asset's digest.
    func contents(of asset: Asset, in zone: ZoneID, chunkSize: Int) -> AsyncThrowingStream<Data, any Error>

    /// Removes the asset files of `zone` that nothing refers to any more (see requirement 2).
    ///
    /// - Returns: How many asset files were removed.
    @discardableResult
    func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int
}
