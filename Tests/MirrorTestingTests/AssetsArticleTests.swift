import Testing

/// The article "Assets" shows code that Tests/MagicMirrorTests/Articles/AssetsArticleTests.swift
/// compiles and runs: this suite keeps the two identical.
@Suite(.timeLimit(.minutes(5))) struct AssetsArticleTests {
    @Test func everySwiftBlockOfTheArticleIsInTheCompiledTest() throws {
        try DocumentationArticleTests.expectArticle(
            "Sources/MagicMirror/Documentation.docc/Assets.md", title: "Assets", blockCount: 6,
            compiledIn: "Tests/MagicMirrorTests/Articles/AssetsArticleTests.swift")
    }
}
