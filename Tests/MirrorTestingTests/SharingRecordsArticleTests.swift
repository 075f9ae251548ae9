import Foundation
import Testing

/// The article "Sharing records with other users" shows code that
/// Tests/MagicMirrorTests/Articles/SharingRecordsArticleTests.swift compiles and runs: this
/// suite keeps them identical.
@Suite(.timeLimit(.minutes(5))) struct SharingRecordsArticleTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()

    private func read(_ path: String) throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everySwiftBlockOfTheArticleIsInACompiledTest() throws {
        let articlePath = "Sources/MagicMirror/Documentation.docc/SharingRecords.md"
        let testPath = "Tests/MagicMirrorTests/Articles/SharingRecordsArticleTests.swift"
        let article = try read(articlePath)
        let test = try read(testPath)
        #expect(article.hasPrefix("# Sharing records with other users\n"))
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: article)
        #expect(blocks.count == 4)
        for block in blocks {
            #expect(test.contains(block), "this block of \(articlePath) is not in \(testPath):\n\(block)")
        }
        let landing = try read("Sources/MagicMirror/Documentation.docc/MagicMirror.md")
        #expect(landing.contains("<doc:SharingRecords>"))
    }
}
