import MagicMirror

// The record types of the relationship tests, shared by `mirror-worker relationships` and
// the Relationships suites: an author has books (cascade) that have chapters (cascade);
// a book names an editor and reviewers among the authors (nullify); an award names its
// winner (deny).

/// The target of every rule.
public struct LinkAuthor: Recordable {
    public var id: String
    public var name: String

    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// A book: deleting its author deletes it; deleting its editor or a reviewer removes them.
public struct LinkBook: Recordable {
    public var id: String
    public var title: String
    public var author: Reference<LinkAuthor>
    public var editor: Reference<LinkAuthor>?
    public var reviewers: [Reference<LinkAuthor>]

    public init(
        id: String, title: String, author: Reference<LinkAuthor>, editor: Reference<LinkAuthor>? = nil,
        reviewers: [Reference<LinkAuthor>] = []
    ) {
        self.id = id
        self.title = title
        self.author = author
        self.editor = editor
        self.reviewers = reviewers
    }

    public static let deleteRules: [DeleteRule<LinkBook>] = [
        .cascade("author", \.author),
        .nullify("editor", \.editor),
        .nullify("reviewers", \.reviewers),
    ]
}

/// A chapter: deleting its book (also by a cascade from the author) deletes it.
public struct LinkChapter: Recordable {
    public var id: String
    public var book: Reference<LinkBook>

    public init(id: String, book: Reference<LinkBook>) {
        self.id = id
        self.book = book
    }

    public static let deleteRules: [DeleteRule<LinkChapter>] = [.cascade("book", \.book)]
}

/// An award: its winner cannot be deleted while it exists.
public struct LinkAward: Recordable {
    public var id: String
    public var winner: Reference<LinkAuthor>

    public init(id: String, winner: Reference<LinkAuthor>) {
        self.id = id
        self.winner = winner
    }

    public static let deleteRules: [DeleteRule<LinkAward>] = [.deny("winner", \.winner)]
}

/// A mirror of every relationship type on one database (opening them stores their rules),
/// for the relationship tests of every database.
public struct LinkLibrary: Sendable {
    public let authors: Mirror<LinkAuthor>
    public let books: Mirror<LinkBook>
    public let chapters: Mirror<LinkChapter>
    public let awards: Mirror<LinkAward>

    public init(_ database: any RecordDatabase) async throws {
        authors = try await Mirror(database: database)
        books = try await Mirror(database: database)
        chapters = try await Mirror(database: database)
        awards = try await Mirror(database: database)
    }

    /// Flushes every mirror.
    public func flush() async throws {
        try await authors.flush()
        try await books.flush()
        try await chapters.flush()
        try await awards.flush()
    }
}
