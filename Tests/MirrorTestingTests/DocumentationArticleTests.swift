import Foundation
import Testing

/// The article "Testing code that uses MagicMirror" shows the example that
/// DocumentationExampleTests.swift compiles and runs: this suite keeps the two identical.
@Suite(.timeLimit(.minutes(5))) struct DocumentationArticleTests {
    /// The package's root directory, from this file's path.
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()

    private static let articlePath = "Sources/MirrorTesting/Documentation.docc/TestingWithMirrorTesting.md"
    private static let examplePath = "Tests/MirrorTestingTests/DocumentationExampleTests.swift"

    private func read(_ path: String) throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// Checks that an article whose code a test compiles and runs has `blockCount` swift
    /// blocks, each in the test file exactly as written, and is linked from the landing page.
    ///
    /// - Parameters:
    ///   - article: The article's path from the package root; its title is `# <title>`.
    ///   - testPath: The path of the test file that compiles the blocks.
    static func expectArticle(
        _ article: String, title: String, blockCount: Int, compiledIn testPath: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        func read(_ path: String) throws -> String {
            try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
        }
        let text = try read(article)
        let tests = try read(testPath)
        #expect(text.hasPrefix("# \(title)\n"), sourceLocation: sourceLocation)
        let blocks = swiftCodeBlocks(in: text)
        #expect(blocks.count == blockCount, sourceLocation: sourceLocation)
        for block in blocks {
            #expect(
                tests.contains(block), "this block of \(article) is not in \(testPath) as it is:\n\(block)",
                sourceLocation: sourceLocation)
        }
        let landing = try read("Sources/MagicMirror/Documentation.docc/MagicMirror.md")
        let name = URL(fileURLWithPath: article).deletingPathExtension().lastPathComponent
        #expect(landing.contains("<doc:\(name)>"), sourceLocation: sourceLocation)
    }

    /// The contents of every fenced code block marked `swift`, without the fences.
    static func swiftCodeBlocks(in markdown: String) -> [String] {
        DocumentationCodeBlockTests.codeBlocks(in: markdown, language: "swift")
    }

    @Test func everyCodeBlockOfTheArticleIsInTheCompiledExample() throws {
        let article = try read(Self.articlePath)
        let example = try read(Self.examplePath)
        let blocks = Self.swiftCodeBlocks(in: article)
        // The app's code and its tests.
        #expect(blocks.count == 2, "\(blocks.count) swift code blocks in \(Self.articlePath)")
        for block in blocks {
            let isInExample = example.contains(block)
            #expect(
                isInExample,
                "this code block of \(Self.articlePath) is not in \(Self.examplePath) as it is:\n\(block)")
        }
        #expect(blocks.contains { $0.contains("struct ShoppingListTests") })
        #expect(blocks.contains { $0.contains("final class ShoppingList") })
    }

    @Test func theArticleIsTheOneTheLandingPageLinks() throws {
        let article = try read(Self.articlePath)
        #expect(article.hasPrefix("# Testing code that uses MagicMirror\n"))
        let landing = try read("Sources/MirrorTesting/Documentation.docc/MirrorTesting.md")
        #expect(landing.contains("<doc:TestingWithMirrorTesting>"))
    }

    @Test func codeBlocksAreFoundWithoutTheirFences() {
        let markdown = "Text\n\n```swift\nlet a = 1\n\nlet b = 2\n```\n\n```\nnot swift\n```\n```swift\nc()\n```\n"
        #expect(Self.swiftCodeBlocks(in: markdown) == ["let a = 1\n\nlet b = 2", "c()"])
    }
}
