#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
@testable import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// A record that carries an asset (the same JSON as `mirror-worker asset`'s).
struct AssetRecord: Recordable {
    var id: String
    var file: Asset
}

@Suite(.timeLimit(.minutes(5))) struct AssetTests {
    let directory: TemporaryDirectory
    let zone = ZoneID.public("AssetRecord")

    init() throws { directory = try TemporaryDirectory("assets") }

    private func open() throws -> JSONFileDatabase {
        try JSONFileDatabase(isolatedDirectory: directory.url)
    }

    private var assetsDirectory: URL { directory.url.appendingPathComponent("public/AssetRecord/assets") }

    private func assetFiles() -> [String] {
        JSONFileTestSupport.names(in: assetsDirectory).filter { Asset.isDigest($0) }.sorted()
    }

    @Test func aStoredAssetTravelsWithItsRecordToAnotherWriter() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let bytes = AssetPayload.bytes(name: "photo", size: 3 * (1 << 20) + 17)
        let asset = try await mirror.storeAsset(bytes)
        #expect(asset.size == bytes.count)
        #expect(asset.digest == SHA256.hex(of: bytes))
        mirror.dataModel.append(AssetRecord(id: "a", file: asset))
        try await mirror.flush()

        let other = try await Mirror<AssetRecord>(database: try open())
        let record = try #require(other.dataModel.first)
        #expect(try await other.data(for: record.file) == bytes)
        let url = try await other.fileURL(for: record.file)
        #expect(try Data(contentsOf: url) == bytes)
        var pieces = 0
        var streamed = Data()
        for try await piece in other.contents(of: record.file, chunkSize: 1 << 20) {
            #expect(piece.count <= 1 << 20)
            pieces += 1
            streamed.append(piece)
        }
        #expect(pieces == 4)
        #expect(streamed == bytes)
        // The JSON a reader of the files sees.
        let stored = try await other.database.fetch(["a"], in: zone)
        let fields = try #require(object(stored.first?.fields))
        #expect((fields["file"] as? NSDictionary)?["$asset"] as? String == asset.digest)
    }

    @Test func aFileIsCopiedAndTheSameBytesAreKeptOnce() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let source = directory.url.appendingPathComponent("source.bin")
        let bytes = AssetPayload.bytes(name: "file", size: 2_500_000)
        try bytes.write(to: source)
        let fromFile = try await mirror.storeAsset(contentsOf: source)
        try FileManager.default.removeItem(at: source)
        let fromData = try await mirror.storeAsset(bytes)
        #expect(fromFile == fromData)
        #expect(assetFiles() == [fromFile.digest])
        #expect(try await mirror.data(for: fromFile) == bytes)
        // Read-only, and nothing else left behind but the lock and this writer's lease.
        #expect(try JSONFileTestSupport.mode(assetsDirectory.appendingPathComponent(fromFile.digest)) & 0o222 == 0)
        #expect(JSONFileTestSupport.names(in: assetsDirectory).filter { $0.hasPrefix("tmp.") }.isEmpty)
        let empty = try await mirror.storeAsset(Data())
        #expect(empty.size == 0)
        #expect(try await mirror.data(for: empty) == Data())
    }

    @Test func aPrivateZonesAssetsAreAsPrivateAsItsRecords() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open(), scope: .private, user: try MirrorUser(name: "alice"))
        let asset = try await mirror.storeAsset(Data("secret".utf8))
        let assets = directory.url.appendingPathComponent("private/alice/AssetRecord/assets")
        #expect(try JSONFileTestSupport.mode(assets) & 0o777 == 0o700)
        #expect(try JSONFileTestSupport.mode(assets.appendingPathComponent(asset.digest)) & 0o777 == 0o400)
        for name in JSONFileTestSupport.names(in: assets) where !Asset.isDigest(name) {
            #expect(try JSONFileTestSupport.mode(assets.appendingPathComponent(name)) & 0o077 == 0, "\(name)")
        }
        #expect(try await mirror.data(for: asset) == Data("secret".utf8))
    }

    @Test func aMissingSourceFileIsNotFound() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        await expectMirrorError(.notFound) {
            try await mirror.storeAsset(contentsOf: directory.url.appendingPathComponent("nothing"))
        }
    }

    @Test func collectionRemovesWhatNoRecordRefersToAndKeepsWhatIsPending() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let kept = try await mirror.storeAsset(Data("kept".utf8))
        let dropped = try await mirror.storeAsset(Data("dropped".utf8))
        let pending = try await mirror.storeAsset(Data("pending".utf8))
        mirror.dataModel.append(AssetRecord(id: "kept", file: kept))
        mirror.dataModel.append(AssetRecord(id: "dropped", file: dropped))
        try await mirror.flush()
        mirror.dataModel.removeAll { $0.id == "dropped" }
        try await mirror.flush()

        // `pending` was stored and no record refers to it yet: this writer's lease keeps it.
        #expect(try await mirror.removeUnreferencedAssets() == 1)
        #expect(assetFiles() == [kept.digest, pending.digest].sorted())
        // So does a collection by another writer.
        let other = try await Mirror<AssetRecord>(database: try open())
        #expect(try await other.removeUnreferencedAssets() == 0)
        #expect(assetFiles().count == 2)

        mirror.dataModel.append(AssetRecord(id: "pending", file: pending))
        try await mirror.flush()
        mirror.dataModel.removeAll()
        try await mirror.flush()
        #expect(try await other.removeUnreferencedAssets() == 2)
        #expect(assetFiles().isEmpty)
        await expectMirrorError(.notFound) { try await mirror.data(for: kept) }
    }

    @Test func aRecordReferringToAnAssetThatIsNotStoredIsRefused() async throws {
        defer { directory.remove() }
        let database = try open()
        let digest = SHA256.hex(of: Array("never stored".utf8))
        let save = jsonSave("r", ["file": ["$asset": digest, "size": 12] as [String: any Sendable]])
        let refused = await expectMirrorError(.notFound) { try await database.commit([save], to: zone) }
        #expect(refused?.nothingStored == true)
        #expect(try await database.fetchAll(in: zone).records.isEmpty)

        // Through a mirror: an asset of another zone is not in this one.
        let elsewhere = try await database.storeAsset(Data("elsewhere".utf8), in: .public("Other"))
        let mirror = try await Mirror<AssetRecord>(database: database)
        mirror.dataModel.append(AssetRecord(id: "r", file: elsewhere))
        await expectMirrorError(.notFound) { try await mirror.flush() }
        #expect(mirror.hasPendingChanges)
        #expect(try await database.fetchAll(in: zone).records.isEmpty)
    }

    @Test(arguments: ["../../../etc/passwd", "/etc/passwd", "ABCDEF", ""])
    func anAssetValueThatIsNotADigestIsRefusedAndNeverDecodes(value: String) async throws {
        defer { directory.remove() }
        let database = try open()
        let hostile = jsonSave("bad", ["file": ["$asset": value, "size": 1] as [String: any Sendable]])
        let refused = await expectMirrorError(.invalidRecord) { try await database.commit([hostile], to: zone) }
        #expect(refused?.nothingStored == true)

        // A writer that bypasses the check (another program appending to the journal):
        // the record is reported and skipped, the others load, nothing outside is touched.
        let good = try await database.storeAsset(Data("good".utf8), in: zone)
        try await database.commit(
            [jsonSave("good", ["id": "good", "file": ["$asset": good.digest, "size": good.size] as [String: any Sendable]])],
            to: zone)
        // Another program appends a copy of that line naming another record and a "digest"
        // that is a path.
        let journal = try JSONFileTestSupport.journal(in: directory.url.appendingPathComponent("public/AssetRecord"))
        let goodLine = try #require(String(data: try JSONFileTestSupport.journalData(journal), encoding: .utf8)?
            .split(separator: "\n").last.map(String.init))
        let badLine = JSONFileTestSupport.unsealed(goodLine)
            .replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":2,")
            .replacingOccurrences(of: "\"good\"", with: "\"bad\"")
            .replacingOccurrences(of: "\"\(good.digest)\"", with: "\"\(value)\"")
        #expect(badLine.contains("\"$asset\":\"\(value)\"") && badLine.contains("\"id\":\"bad\""))
        try JSONFileTestSupport.append(Data((badLine + "\n").utf8), to: journal)
        let errors = ErrorNotificationCollector(naming: ["bad"])
        let mirror = try await Mirror<AssetRecord>(database: try open())
        #expect(mirror.dataModel.map(\.id) == ["good"])
        try await errors.errors.wait("the bad record reported") { $0.contains { $0.kind == .decodingFailed } }
        #expect(try await mirror.data(for: good) == Data("good".utf8))
        // A record that claims an enormous size for a real asset gets a clear error, not a
        // failed allocation.
        let huge = try JSONDecoder().decode(
            Asset.self, from: Data(#"{"$asset":"\#(good.digest)","size":1125899906842624}"#.utf8))
        await expectMirrorError(.corruptEntry) { try await mirror.data(for: huge) }
        await expectMirrorError(.corruptEntry) { try await mirror.fileURL(for: huge) }
        #expect(try await mirror.removeUnreferencedAssets() == 0)
        #expect(assetFiles() == [good.digest])
    }

    @Test func anAssetFileRemovedOrChangedByAnotherProgramIsAClearErrorAndNothingElseIsLost() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let first = try await mirror.storeAsset(Data("first asset".utf8))
        let second = try await mirror.storeAsset(Data("second asset".utf8))
        mirror.dataModel.append(AssetRecord(id: "first", file: first))
        mirror.dataModel.append(AssetRecord(id: "second", file: second))
        try await mirror.flush()
        let firstFile = assetsDirectory.appendingPathComponent(first.digest)
        let secondFile = assetsDirectory.appendingPathComponent(second.digest)

        try FileManager.default.removeItem(at: firstFile)
        await expectMirrorError(.notFound) { try await mirror.data(for: first) }
        await expectMirrorError(.notFound) { try await mirror.fileURL(for: first) }
        // Same size, other bytes: the digest check catches it.
        chmod(secondFile.path, 0o644)
        try Data("SECOND ASSET".utf8).write(to: secondFile)
        await expectMirrorError(.corruptEntry) { try await mirror.data(for: second) }
        // Other size: even the file URL is refused.
        try Data("second asset, longer".utf8).write(to: secondFile)
        let error = await expectMirrorError(.corruptEntry) { try await mirror.fileURL(for: second) }
        #expect(error?.description.contains(second.digest) == true)
        // A symbolic link in its place is not followed.
        try FileManager.default.removeItem(at: secondFile)
        try FileManager.default.createSymbolicLink(
            atPath: secondFile.path, withDestinationPath: directory.url.appendingPathComponent("x").path)
        await expectMirrorError(.corruptEntry) { try await mirror.data(for: second) }

        // The records are untouched, and storing the bytes again repairs the files.
        #expect(mirror.dataModel.map(\.id) == ["first", "second"])
        try FileManager.default.removeItem(at: secondFile)
        _ = try await mirror.storeAsset(Data("first asset".utf8))
        _ = try await mirror.storeAsset(Data("second asset".utf8))
        #expect(try await mirror.data(for: first) == Data("first asset".utf8))
        #expect(try await mirror.data(for: second) == Data("second asset".utf8))
    }

    @Test func anAssetsDirectoryThatLinksOutOfTheDatabaseIsRefused() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let outside = try TemporaryDirectory("outside")
        defer { outside.remove() }
        try FileManager.default.createSymbolicLink(atPath: assetsDirectory.path, withDestinationPath: outside.path)
        await expectMirrorError(.permissionDenied) { try await mirror.storeAsset(Data("x".utf8)) }
        await expectMirrorError(.permissionDenied) { try await mirror.removeUnreferencedAssets() }
        #expect(JSONFileTestSupport.names(in: outside.url).isEmpty)
    }

    /// A store that cannot write or flush its copy fails with the disk's error, leaves no
    /// file behind, and the next store works.
    @Test(arguments: [(FileSystem.Operation.write, ENOSPC), (.fsync, EIO), (.rename, EIO)])
    func aStoreTheDiskRefusesLeavesNothing(operation: FileSystem.Operation, code: Int32) async throws {
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let mirror = try await Mirror<AssetRecord>(database: database)
        _ = try await mirror.storeAsset(Data("first".utf8))  // the directory and lease exist now
        let flushesBefore = faulty.count(.fsync)
        _ = try await mirror.storeAsset(Data("second".utf8))
        // The copy, then the directory after the rename: both flushed before the store returns.
        #expect(faulty.count(.fsync) - flushesBefore == 2)

        faulty.failNext(operation, errno: code)
        let error = await expectMirrorError(code == ENOSPC ? .diskFull : .ioFailure) {
            try await mirror.storeAsset(AssetPayload.bytes(name: "refused", size: 100_000))
        }
        #expect(error?.recordType == "AssetRecord")
        #expect(!assetFiles().contains(SHA256.hex(of: AssetPayload.bytes(name: "refused", size: 100_000))))
        #expect(JSONFileTestSupport.names(in: assetsDirectory).filter { $0.hasPrefix("tmp.") }.isEmpty)
        #expect(assetFiles().count == 2)
        let again = try await mirror.storeAsset(AssetPayload.bytes(name: "refused", size: 100_000))
        #expect(try await mirror.data(for: again) == AssetPayload.bytes(name: "refused", size: 100_000))
    }

    @Test func aZoneDirectoryRemovedByAnotherProgramIsAClearError() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let asset = try await mirror.storeAsset(Data("x".utf8))
        try FileManager.default.removeItem(at: directory.url.appendingPathComponent("public/AssetRecord"))
        await expectMirrorError(.notFound) { try await mirror.storeAsset(Data("y".utf8)) }
        await expectMirrorError(.notFound) { try await mirror.data(for: asset) }
        #expect(try await mirror.removeUnreferencedAssets() == 0)
    }

    @Test func aDatabaseThatDoesNotStoreAssetsSaysSo() async throws {
        // A database of records only (InMemoryDatabase stores assets, the wrapper does not).
        let mirror = try await Mirror<AssetRecord>(database: ScriptedDatabase(InMemoryDatabase()))
        await expectMirrorError(.unsupported) { try await mirror.storeAsset(Data("x".utf8)) }
        let asset = try JSONDecoder().decode(
            Asset.self, from: Data(#"{"$asset":"\#(String(repeating: "a", count: 64))","size":1}"#.utf8))
        await expectMirrorError(.unsupported) { try await mirror.data(for: asset) }
    }

    @Test func cancellingAStoreLeavesNothingBehind() async throws {
        defer { directory.remove() }
        let mirror = try await Mirror<AssetRecord>(database: try open())
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await mirror.storeAsset(AssetPayload.bytes(name: "big", size: 4 << 20))
        }
        await expectMirrorError(.cancelled) { try await task.value }
        #expect(assetFiles().isEmpty)
        #expect(JSONFileTestSupport.names(in: assetsDirectory).filter { $0.hasPrefix("tmp.") }.isEmpty)
    }
}
