import Foundation
import Testing

/// The article "Encrypting private records" shows code that
/// Tests/MagicMirrorTests/Articles/EncryptingPrivateRecordsArticleTests.swift and, for the blocks that
/// use AES-GCM, Adapters/Encryption/Tests/MagicMirrorEncryptionTests/ArticleTests.swift
/// compile and run: this suite keeps them identical.
@Suite(.timeLimit(.minutes(5))) struct EncryptingPrivateRecordsArticleTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()

    private func read(_ path: String) throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everySwiftBlockOfTheArticleIsInACompiledTest() throws {
        let articlePath = "Sources/MagicMirror/Documentation.docc/EncryptingPrivateRecords.md"
        let testPaths = [
            "Tests/MagicMirrorTests/Articles/EncryptingPrivateRecordsArticleTests.swift",
            "Adapters/Encryption/Tests/MagicMirrorEncryptionTests/ArticleTests.swift",
        ]
        let article = try read(articlePath)
        let tests = try testPaths.map(read)
        #expect(article.hasPrefix("# Encrypting private records\n"))
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: article)
        #expect(blocks.count == 3)
        for block in blocks {
            #expect(tests.contains { $0.contains(block) }, "this block of \(articlePath) is in none of \(testPaths):\n\(block)")
        }
        let landing = try read("Sources/MagicMirror/Documentation.docc/MagicMirror.md")
        #expect(landing.contains("<doc:EncryptingPrivateRecords>"))
    }
}
