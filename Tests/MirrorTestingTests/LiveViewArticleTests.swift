import Testing

/// The article "Live queries" shows code that Tests/MagicMirrorTests/Articles/LiveViewArticleTests.swift
/// compiles and runs: this suite keeps the two identical.
@Suite(.timeLimit(.minutes(5))) struct LiveQueriesArticleTests {
    @Test func everySwiftBlockOfTheArticleIsInTheCompiledTest() throws {
        try DocumentationArticleTests.expectArticle(
            "Sources/MagicMirror/Documentation.docc/LiveQueries.md", title: "Live queries", blockCount: 5,
            compiledIn: "Tests/MagicMirrorTests/Articles/LiveViewArticleTests.swift")
    }
}
