import Foundation
import Testing

/// The article "Changing your record types" and the "Add a field later" block of "Getting
/// Started" show code that Tests/MagicMirrorTests/Articles/ChangingYourRecordTypesArticleTests.swift
/// compiles and runs: this suite keeps them identical (with the extraction of
/// ``DocumentationArticleTests``).
@Suite(.timeLimit(.minutes(5))) struct ChangingYourRecordTypesArticleBlocksTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()
    private static let testPath = "Tests/MagicMirrorTests/Articles/ChangingYourRecordTypesArticleTests.swift"

    private func read(_ path: String) throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everySwiftBlockOfTheArticleIsInTheCompiledTest() throws {
        let articlePath = "Sources/MagicMirror/Documentation.docc/ChangingYourRecordTypes.md"
        let article = try read(articlePath)
        let tests = try read(Self.testPath)
        #expect(article.hasPrefix("# Changing your record types\n"))
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: article)
        #expect(blocks.count == 8)
        for block in blocks {
            #expect(tests.contains(block), "this block of \(articlePath) is not in \(Self.testPath) as it is:\n\(block)")
        }
        let landing = try read("Sources/MagicMirror/Documentation.docc/MagicMirror.md")
        #expect(landing.contains("<doc:ChangingYourRecordTypes>"))
    }

    @Test func gettingStartedsNewFieldIsInTheCompiledTest() throws {
        let gettingStarted = try read("Sources/MagicMirror/Documentation.docc/GettingStarted.md")
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: gettingStarted).filter { $0.contains("migrations") }
        #expect(blocks.count == 1)
        let tests = try read(Self.testPath)
        for block in blocks { #expect(tests.contains(block), "not compiled as it is:\n\(block)") }
    }
}
