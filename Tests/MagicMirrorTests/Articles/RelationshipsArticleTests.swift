import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Relationships" article (Sources/MagicMirror/Documentation.docc/
// Relationships.md), compiled and run. Its blocks appear here exactly as in the article,
// which is why they are not indented; Tests/MirrorTestingTests/RelationshipsArticleTests.swift
// checks that every block of the article is here.

enum RelationshipsArticle {
struct Author: Recordable {
    var id: String
    var name: String
}

struct Book: Recordable {
    var id = UUID()
    var title: String
    var author: Reference<Author>
    var editor: Reference<Author>?
    var reviewers: [Reference<Author>] = []

    static let deleteRules: [DeleteRule<Book>] = [
        .cascade("author", \.author),
        .nullify("editor", \.editor),
        .nullify("reviewers", \.reviewers),
    ]
}

struct Award: Recordable {
    var id: String
    var winner: Reference<Author>

    static let deleteRules: [DeleteRule<Award>] = [.deny("winner", \.winner)]
}
}

@Suite(.timeLimit(.minutes(5))) struct RelationshipsArticleTests {
    typealias Author = RelationshipsArticle.Author
    typealias Book = RelationshipsArticle.Book
    typealias Award = RelationshipsArticle.Award

    @Test func theArticlesExamplesRun() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("magicmirror-relationships-article-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try JSONFileDatabase(directory: directory)

let authors = try await Mirror<Author>(database: database)
let books = try await Mirror<Book>(database: database)    // stores Book's delete rules
let ann = Author(id: "ann", name: "Ann")
authors.dataModel.append(ann)
books.dataModel.append(Book(title: "Harbour", author: Reference(to: ann)))
try await authors.flush()
try await books.flush()

        // Another process that only knows authors enforces Book's rules: see
        // RelationshipProcessTests. Here: the stored rules.
        #expect(try database.deleteRules(in: .public("Book")).map(\.field) == ["author", "editor", "reviewers"])

for book in books.dataModel {
    let author = try await authors.resolve(book.author)
    print(book.title, "by", author?.name ?? "nobody")
}

        #expect(try await authors.resolve(books.dataModel[0].author)?.name == "Ann")

let awards = try await Mirror<Award>(database: database)
awards.dataModel.append(Award(id: "prize", winner: Reference(to: ann)))
try await awards.flush()
authors.dataModel.remove(recordID: "ann")
do {
    try await authors.flush()
} catch MirrorError.Kind.refused {
    print("ann keeps her prize:", authors.dataModel.map(\.name))   // ["Ann"]
}

        #expect(authors.lastError?.kind == .refused)
        try await authors.waitUntil(timeout: .seconds(30), "ann to be shown again") { $0.map(\.name) == ["Ann"] }
        #expect(books.dataModel.count == 1)

awards.dataModel.removeAll()
try await awards.flush()
authors.dataModel.remove(recordID: "ann")
try await authors.flush()          // her books went in the same commit

        try await books.waitUntil(timeout: .seconds(30), "her books to go") { $0.isEmpty }
        #expect(authors.dataModel.isEmpty)
    }
}
