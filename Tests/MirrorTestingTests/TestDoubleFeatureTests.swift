import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Every feature of the root package works on both test doubles, `InMemoryDatabase` and
/// `TemporaryDatabase` (issue #36, point 2): assets, relationships, a type with both,
/// sharing, sealing, migrations and live views, each checked on each.
@Suite(.timeLimit(.minutes(5))) struct TestDoubleFeatureTests {
    enum Double: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case inMemory, temporary
        var testDescription: String { rawValue }

        func make() throws -> any RecordDatabase {
            switch self {
            case .inMemory: InMemoryDatabase()
            case .temporary: try TemporaryDatabase(name: "double-features")
            }
        }
    }

    struct Album: Recordable {
        var id: String
        var title: String
    }

    /// A type with both a delete rule and an asset.
    struct Photo: Recordable {
        var id: String
        var album: Reference<Album>
        var image: Asset

        static let deleteRules: [DeleteRule<Photo>] = [.cascade("album", \.album)]
    }

    @Test(arguments: Double.allCases)
    func assets(_ double: Double) async throws {
        let database = try double.make()
        #expect(database is any AssetDatabase)
        let albums = try await Mirror<Album>(database: database)
        let bytes = Data("a picture".utf8)
        let asset = try await albums.storeAsset(bytes)
        #expect(try await albums.data(for: asset) == bytes)
        #expect(try Data(contentsOf: try await albums.fileURL(for: asset)) == bytes)
        var pieces: [Data] = []
        for try await piece in albums.contents(of: asset, chunkSize: 4) { pieces.append(piece) }
        #expect(pieces.map(\.count) == [4, 4, 1])
        #expect(try await albums.removeUnreferencedAssets() == 0, "stored for a record not committed yet")
    }

    @Test(arguments: Double.allCases)
    func aTypeWithADeleteRuleAndAnAsset(_ double: Double) async throws {
        let database = try double.make()
        let albums = try await Mirror<Album>(database: database)
        let photos = try await Mirror<Photo>(database: database)
        let summer = Album(id: "summer", title: "Summer")
        albums.dataModel.append(summer)
        try await albums.flush()
        let image = try await photos.storeAsset(Data("beach".utf8))
        photos.dataModel.append(Photo(id: "p1", album: Reference(to: summer), image: image))
        try await photos.flush()
        #expect(try await photos.removeUnreferencedAssets() == 0, "a live record refers to it")

        albums.dataModel.remove(recordID: "summer")        // cascades to the photo
        try await albums.flush()
        _ = try await photos.waitUntil("the cascade") { $0.isEmpty }
        #expect(try await photos.removeUnreferencedAssets() == 1)
        await #expect(throws: MirrorError.self) { _ = try await photos.data(for: image) }
    }

    @Test(arguments: Double.allCases)
    func aRecordReferringToAnAssetNotStoredIsRefused(_ double: Double) async throws {
        let database = try double.make()
        let elsewhere = try await (database as! any AssetDatabase).storeAsset(Data("x".utf8), in: .public("Other"))
        let error = await #expect(throws: MirrorError.self) {
            try await database.commit(
                [.save("p1", fields: try JSONEncoder().encode(["image": elsewhere]), baseVersion: 0,
                       timestamp: HybridLogicalClock.shared.now())],
                to: .public("Photo"))
        }
        #expect(error?.kind == .notFound)
        #expect(error?.nothingStored == true)
    }

    @Test(arguments: Double.allCases)
    func relationships(_ double: Double) async throws {
        let database = try double.make()
        #expect(database is any RelationshipDatabase)
        let albums = try await Mirror<Album>(database: database)
        let photos = try await Mirror<Photo>(database: database)
        albums.dataModel.append(Album(id: "a", title: "A"))
        try await albums.flush()
        let image = try await photos.storeAsset(Data("i".utf8))
        photos.dataModel.append(Photo(id: "p", album: Reference(recordID: "a"), image: image))
        try await photos.flush()
        let stored = try await database.fetchAll(in: .public("Photo")).records
        #expect(stored.count == 1)
    }

    struct Note: Recordable {
        var id: String
        var text: String
    }

    @Test(arguments: Double.allCases)
    func sharing(_ double: Double) async throws {
        let database = try double.make()
        #expect(database is any SharingDatabase)
        let ann = try MirrorUser(name: "ann")
        let bob = try MirrorUser(name: "bob")
        let mine = try await Mirror<Note>(database: database, scope: .private, user: ann)
        mine.dataModel.append(Note(id: "n1", text: "for bob"))
        try await mine.flush()
        try await mine.share("n1", with: [bob])
        let shared = try await Mirror<Note>(database: database, scope: .shared, user: bob)
        #expect(shared.dataModel.map(\.text) == ["for bob"])
    }

    @Test(arguments: Double.allCases)
    func sealing(_ double: Double) async throws {
        let database = try double.make()
        let ann = try MirrorUser(name: "ann")
        let configuration = MirrorConfiguration(cipher: InsecureTestCipher(keyID: "k1", secret: "secret"))
        let notes = try await Mirror<Note>(database: database, scope: .private, user: ann, configuration: configuration)
        notes.dataModel.append(Note(id: "n1", text: "pineapple"))
        try await notes.flush()
        let stored = try #require(try await database.fetch(["n1"], in: .private("Note", user: ann)).first)
        #expect(stored.fields.map { $0.range(of: Data("pineapple".utf8)) == nil } == true, "sealed")
        let reopened = try await Mirror<Note>(database: database, scope: .private, user: ann, configuration: configuration)
        #expect(reopened.dataModel.map(\.text) == ["pineapple"])
    }

    struct NoteV2: Recordable {
        static var recordType: String { "Note" }
        var id: String
        var text: String
        var pinned = false
        static let migrations: [RecordMigration] = [.add("pinned", default: false)]
    }

    @Test(arguments: Double.allCases)
    func migrations(_ double: Double) async throws {
        let database = try double.make()
        let old = try await Mirror<Note>(database: database)
        old.dataModel.append(Note(id: "n1", text: "old"))
        try await old.flush()
        let new = try await Mirror<NoteV2>(database: database)
        #expect(new.dataModel.array == [NoteV2(id: "n1", text: "old", pinned: false)])
        #expect(try await new.migrateStoredRecords() == 1)
        #expect(new.skippedRecords.isEmpty)
    }

    @Test(arguments: Double.allCases)
    func views(_ double: Double) async throws {
        let database = try double.make()
        let notes = try await Mirror<Note>(database: database)
        let view = notes.view(where: RecordFilter { $0.text.hasPrefix("b") }, sortedBy: .descending(\.text))
        notes.dataModel.append(contentsOf: [Note(id: "1", text: "b1"), Note(id: "2", text: "a"), Note(id: "3", text: "b2")])
        #expect(view.records.map(\.id) == ["3", "1"])
        try await notes.flush()
        let other = try await Mirror<Note>(database: database)
        #expect(other.view(sortedBy: .recentlyModified, limit: 1).count == 1)
    }
}
