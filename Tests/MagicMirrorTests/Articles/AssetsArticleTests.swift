import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Assets" article (Sources/MagicMirror/Documentation.docc/Assets.md),
// compiled and run. Its blocks appear here exactly as in the article, which is why they are
// not indented; Tests/MirrorTestingTests/AssetsArticleTests.swift checks that every block
// of the article is here.

enum AssetsArticle {
struct Photo: Recordable {
    var id = UUID()
    var caption: String
    var image: Asset
}
}

@Suite(.timeLimit(.minutes(5))) struct AssetsArticleTests {
    typealias Photo = AssetsArticle.Photo

    @Test func theArticlesExamplesRun() async throws {
        let database = try TemporaryDatabase(name: "assets-article")
        defer { try? database.remove() }
        let pictureURL = database.directory.appendingPathComponent("harbour.jpg")
        let picture = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try picture.write(to: pictureURL)
        let copyURL = database.directory.appendingPathComponent("copy.jpg")
        #expect(FileManager.default.createFile(atPath: copyURL.path, contents: nil))

let photos = try await Mirror<Photo>(database: database)
let image = try await photos.storeAsset(contentsOf: pictureURL)
photos.dataModel.append(Photo(caption: "Harbour", image: image))
try await photos.flush()

        #expect(image.size == picture.count)

let bytes = try await photos.data(for: photos.dataModel[0].image)
let url = try await photos.fileURL(for: photos.dataModel[0].image)

        #expect(bytes == picture)
        #expect(try Data(contentsOf: url) == picture)

let output = try FileHandle(forWritingTo: copyURL)
for try await piece in photos.contents(of: photos.dataModel[0].image) {
    try output.write(contentsOf: piece)
}
try output.close()

        #expect(try Data(contentsOf: copyURL) == picture)

photos.dataModel.removeAll()
try await photos.flush()
let removed = try await photos.removeUnreferencedAssets()

        #expect(removed == 1)
        // The block prints which error it met (the file was collected: removed).

do {
    _ = try await photos.data(for: image)
} catch MirrorError.Kind.notFound {
    print("another program removed the file")
} catch MirrorError.Kind.corruptEntry {
    print("another program changed the file")
}

        await #expect(throws: MirrorError.self) { try await photos.data(for: image) }
    }
}
