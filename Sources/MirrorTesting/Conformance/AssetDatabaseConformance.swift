import Foundation
import MagicMirror

/// The implementation requirements of `AssetDatabase`, as a list of checks that any test
/// target runs on its own database, the way it runs ``RecordDatabaseConformance``.
///
/// The ``DatabaseUnderTest`` must hold an `AssetDatabase`, and its
/// ``DatabaseUnderTest/otherWriter`` must open one too (another process's view of the same
/// data). ``DatabaseUnderTest/startNewGeneration`` is not used.
///
/// ```swift
/// @Test(arguments: AssetDatabaseConformance.checks)
/// func storesAssets(_ check: ConformanceCheck) async throws {
///     try await check.run { try await MyDatabase.underTest() }
/// }
/// ```
public enum AssetDatabaseConformance {
    /// Every check, in the order of the requirements they cover.
    public static var checks: [ConformanceCheck] {
        [readsBack, missingAssetIsRefused, invalidReferenceIsRefused, collection, missingFileIsNotFound]
    }

    static let zone = ZoneID.public("Photo")

    /// The database of `subject` as an `AssetDatabase`.
    private static func assets(_ database: any RecordDatabase) throws(ConformanceFailure) -> any AssetDatabase {
        guard let assets = database as? any AssetDatabase else {
            throw ConformanceFailure(
                message: "\(type(of: database)) is not an AssetDatabase", file: #fileID, line: #line)
        }
        return assets
    }

    /// A save of a record whose `image` field is `asset`.
    private static func saveReferring(to asset: Asset, id: String, base: Int = 0) -> RecordOperation {
        let encoded = (try? JSONEncoder().encode(["image": asset])) ?? Data("{}".utf8)
        return .save(id, fields: encoded, baseVersion: base, timestamp: now())
    }

    /// Every piece of an asset's contents.
    private static func read(_ asset: Asset, from database: any AssetDatabase, chunkSize: Int) async throws -> [Data] {
        var pieces: [Data] = []
        for try await piece in database.contents(of: asset, in: zone, chunkSize: chunkSize) { pieces.append(piece) }
        return pieces
    }

    static let readsBack = ConformanceCheck(
        "a stored asset reads back byte for byte, in pieces, from every writer", requirement: 1
    ) { subject in
        let db = try assets(subject.database)
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) })
        let asset = try await db.storeAsset(bytes, in: zone)
        try expectEqual(asset.size, bytes.count, "the asset's size")
        let again = try await db.storeAsset(bytes, in: zone)
        try expectEqual(again, asset, "the same bytes stored twice")
        try await db.commit([saveReferring(to: asset, id: "p")], to: zone)
        for reader in [db, try assets(try await subject.otherWriter())] {
            let pieces = try await read(asset, from: reader, chunkSize: 30_000)
            try expect(pieces.allSatisfy { $0.count <= 30_000 }, "no piece is larger than asked")
            try expectEqual(pieces.reduce(Data(), +), bytes, "the asset's bytes")
            let url = try await reader.fileURL(for: asset, in: zone)
            try expectEqual(try Data(contentsOf: url), bytes, "the bytes of the asset's file")
        }
    }

    static let missingAssetIsRefused = ConformanceCheck(
        "a commit referring to an asset that is not stored is refused and stores nothing", requirement: 1
    ) { subject in
        let db = try assets(subject.database)
        let elsewhere = try await db.storeAsset(Data("in another zone".utf8), in: .public("Other"))
        let error = try await expectMirrorError("a record referring to another zone's asset") {
            try await db.commit([saveReferring(to: elsewhere, id: "p")], to: zone)
        }
        try expectEqual(error.kind, .notFound, "the error's kind")
        try expect(error.nothingStored, "the error says nothing was stored")
        try expectEqual(try await db.fetchAll(in: zone).records.count, 0, "the records stored")
    }

    static let invalidReferenceIsRefused = ConformanceCheck(
        "an \"$asset\" value that is not a digest is refused", requirement: 1
    ) { subject in
        let db = subject.database
        let error = try await expectMirrorError("a record whose asset is a path") {
            try await db.commit(
                [.save("p", fields: Data(#"{"image":{"$asset":"../../etc/passwd","size":1}}"#.utf8),
                       baseVersion: 0, timestamp: now())],
                to: zone)
        }
        try expectEqual(error.kind, .invalidRecord, "the error's kind")
        try expectEqual(try await db.fetchAll(in: zone).records.count, 0, "the records stored")
    }

    static let collection = ConformanceCheck(
        "collection keeps what records refer to and what a live writer stored, and removes the rest",
        requirement: 2
    ) { subject in
        let db = try assets(subject.database)
        let other = try assets(try await subject.otherWriter())
        let referred = try await db.storeAsset(Data("referred".utf8), in: zone)
        let pending = try await db.storeAsset(Data("pending".utf8), in: zone)
        try await db.commit([saveReferring(to: referred, id: "p")], to: zone)
        try expectEqual(try await other.removeUnreferencedAssets(in: zone), 0, "assets removed while both are in use")
        for asset in [referred, pending] {
            try expectEqual(try await read(asset, from: other, chunkSize: 1 << 20).count, 1, "the pieces of \(asset)")
        }
        try await db.commit([.delete("p", baseVersion: 1, timestamp: now())], to: zone)
        try expectEqual(try await other.removeUnreferencedAssets(in: zone), 1, "assets removed once no record refers to one")
        let error = try await expectMirrorError("reading a removed asset") {
            _ = try await read(referred, from: db, chunkSize: 1 << 20)
        }
        try expectEqual(error.kind, .notFound, "the error's kind")
        try expectEqual(try await read(pending, from: db, chunkSize: 1 << 20).count, 1, "the pieces of the pending asset")
    }

    static let missingFileIsNotFound = ConformanceCheck(
        "an asset that is not stored reads as notFound", requirement: 3
    ) { subject in
        let db = try assets(subject.database)
        let stored = try await db.storeAsset(Data("stored".utf8), in: zone)
        let never = try JSONDecoder().decode(
            Asset.self, from: Data(#"{"$asset":"\#(String(repeating: "0", count: 64))","size":6}"#.utf8))
        let error = try await expectMirrorError("reading an asset that was never stored") {
            _ = try await db.fileURL(for: never, in: zone)
        }
        try expectEqual(error.kind, .notFound, "the error's kind")
        try expectEqual(try await read(stored, from: db, chunkSize: 4).count, 2, "the pieces of a stored asset")
    }
}
