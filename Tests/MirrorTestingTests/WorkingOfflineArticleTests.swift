import Foundation
import Testing

/// The article "Working offline" shows code that
/// Tests/MagicMirrorTests/Articles/WorkingOfflineArticleTests.swift compiles and runs: this suite keeps
/// the two identical (with the extraction of ``DocumentationArticleTests``).
@Suite(.timeLimit(.minutes(5))) struct WorkingOfflineArticleTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()

    private func read(_ path: String) throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everySwiftBlockOfTheArticleIsInTheCompiledTest() throws {
        let articlePath = "Sources/MagicMirror/Documentation.docc/WorkingOffline.md"
        let testPath = "Tests/MagicMirrorTests/Articles/WorkingOfflineArticleTests.swift"
        let article = try read(articlePath)
        let tests = try read(testPath)
        #expect(article.hasPrefix("# Working offline\n"))
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: article)
        #expect(blocks.count == 3)
        for block in blocks {
            #expect(tests.contains(block), "this block of \(articlePath) is not in \(testPath) as it is:\n\(block)")
        }
        let landing = try read("Sources/MagicMirror/Documentation.docc/MagicMirror.md")
        #expect(landing.contains("<doc:WorkingOffline>"))
    }
}
