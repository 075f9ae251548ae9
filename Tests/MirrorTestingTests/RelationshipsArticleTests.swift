import Testing

/// The article "Relationships" shows code that
/// Tests/MagicMirrorTests/Articles/RelationshipsArticleTests.swift compiles and runs: this
/// suite keeps the two identical.
@Suite(.timeLimit(.minutes(5))) struct RelationshipsArticleBlockTests {
    @Test func everySwiftBlockOfTheArticleIsInTheCompiledTest() throws {
        try DocumentationArticleTests.expectArticle(
            "Sources/MagicMirror/Documentation.docc/Relationships.md", title: "Relationships", blockCount: 5,
            compiledIn: "Tests/MagicMirrorTests/Articles/RelationshipsArticleTests.swift")
    }
}
