import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// Delete rules through `Mirror`, on every database that enforces them: cascade (also
/// recursively), nullify of to-one and to-many fields, deny (the deleting mirror shows the
/// record again and reports the refusal once), resolving references, dangling references.
@Suite(.timeLimit(.minutes(5))) struct RelationshipMirrorTests {
    static let databases: [DatabaseFactory] = [.inMemory, .jsonFile]

    typealias Library = LinkLibrary

    @Test(arguments: databases)
    func deletingAnAuthorCascadesToItsBooksAndTheirChapters(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let library = try await Library(opened.database)
        let ann = LinkAuthor(id: "ann", name: "Ann")
        let bob = LinkAuthor(id: "bob", name: "Bob")
        library.authors.dataModel.append(contentsOf: [ann, bob])
        library.books.dataModel.append(contentsOf: [
            LinkBook(id: "b1", title: "one", author: Reference(to: ann)),
            LinkBook(id: "b2", title: "two", author: Reference(to: ann)),
            LinkBook(id: "b3", title: "three", author: Reference(to: bob)),
        ])
        library.chapters.dataModel.append(contentsOf: [
            LinkChapter(id: "c1", book: Reference(recordID: "b1")),
            LinkChapter(id: "c3", book: Reference(recordID: "b3")),
        ])
        try await library.flush()

        library.authors.dataModel.remove(recordID: "ann")
        try await library.authors.flush()

        try await waitUntil(library.books, "ann's books to go") { $0.map(\.id) == ["b3"] }
        try await waitUntil(library.chapters, "b1's chapter to go") { $0.map(\.id) == ["c3"] }
        let other = try await opened.otherWriter()
        #expect(try await other.fetchAll(in: .public("LinkBook")).records.map(\.id) == ["b3"])
        #expect(try await other.fetchAll(in: .public("LinkChapter")).records.map(\.id) == ["c3"])
    }

    @Test(arguments: databases)
    func deletingAnEditorOrReviewerNullifiesTheReference(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let library = try await Library(opened.database)
        let ann = LinkAuthor(id: "ann", name: "Ann")
        let eve = LinkAuthor(id: "eve", name: "Eve")
        let kim = LinkAuthor(id: "kim", name: "Kim")
        library.authors.dataModel.append(contentsOf: [ann, eve, kim])
        library.books.dataModel.append(
            LinkBook(id: "b1", title: "one", author: Reference(to: ann), editor: Reference(to: eve),
                     reviewers: [Reference(to: eve), Reference(to: kim)]))
        try await library.flush()

        library.authors.dataModel.remove(recordID: "eve")
        try await library.authors.flush()

        try await waitUntil(library.books, "eve to leave b1") { books in
            books.first?.editor == nil && books.first?.reviewers == [Reference(to: kim)]
        }
        let book = try #require(library.books.dataModel.first)
        #expect(book.author == Reference(to: ann))
        #expect(book.title == "one")
    }

    @Test(arguments: databases)
    func aDeniedDeleteIsRefusedAndTheAuthorStays(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let library = try await Library(opened.database)
        let ann = LinkAuthor(id: "ann-deny", name: "Ann")
        library.authors.dataModel.append(ann)
        library.books.dataModel.append(LinkBook(id: "b-deny", title: "kept", author: Reference(to: ann)))
        library.awards.dataModel.append(LinkAward(id: "prize", winner: Reference(to: ann)))
        try await library.flush()
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains("ann-deny") }

        library.authors.dataModel.remove(recordID: "ann-deny")
        let failure = try await flushFailure(of: library.authors)
        #expect(failure.kind == .refused)
        #expect(failure.recordIDs == ["ann-deny"])
        #expect(failure.message.contains("prize"), "\(failure.message)")
        try await waitUntil(library.authors, "the refused removal to be undone") { $0.map(\.id) == ["ann-deny"] }
        #expect(library.authors.pendingChanges.isEmpty)
        try await library.flush()
        #expect(recorder.errors.map(\.kind) == [.refused], "reported once")

        // Nothing of the commit was stored: the author, its book (a cascade) and the award.
        let other = try await opened.otherWriter()
        #expect(try await other.fetchAll(in: .public("LinkAuthor")).records.map(\.id) == ["ann-deny"])
        #expect(try await other.fetchAll(in: .public("LinkBook")).records.map(\.id) == ["b-deny"])

        // Once the award is gone, the delete goes through.
        library.awards.dataModel.removeAll()
        try await library.awards.flush()
        library.authors.dataModel.remove(recordID: "ann-deny")
        try await library.authors.flush()
        try await waitUntil(library.books, "the book to go") { $0.isEmpty }
    }

    @Test(arguments: databases)
    func aMirrorResolvesAReferenceToTheCurrentValue(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let library = try await Library(opened.database)
        var ann = LinkAuthor(id: "ann", name: "Ann")
        library.authors.dataModel.append(ann)
        let book = LinkBook(id: "b1", title: "one", author: Reference(to: ann))
        library.books.dataModel.append(book)
        try await library.flush()
        ann.name = "Ann B."
        library.authors.dataModel[recordID: "ann"] = ann

        #expect(try await library.authors.resolve(book.author)?.name == "Ann B.")
        // A record another writer stored that the mirror has not pulled yet is fetched.
        let other = try await opened.otherWriter()
        try await other.commit(
            [.save("zed", fields: try JSONEncoder().encode(LinkAuthor(id: "zed", name: "Zed")), baseVersion: 0,
                   timestamp: HLCTimestamp(millis: 1, counter: 0))],
            to: .public("LinkAuthor"))
        let resolved = try await library.authors.resolve([Reference(recordID: "zed"), book.author])
        #expect(resolved.map { $0?.name } == ["Zed", "Ann B."])
    }

    @Test func aDanglingReferenceIsReportedOnceAndResolvesToNil() async throws {
        let database = InMemoryDatabase()
        let library = try await Library(database)
        let ann = LinkAuthor(id: "ann-dangling", name: "Ann")
        library.authors.dataModel.append(ann)
        library.books.dataModel.append(LinkBook(id: "b-dangling", title: "one", author: Reference(to: ann)))
        try await library.flush()
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains("ann-dangling") }

        // A writer that does not know the rules deletes the author: the book stays.
        _ = try await database.simulateDelete(ann)
        try await waitUntil(library.authors, "the author to go") { $0.isEmpty }
        let book = try #require(library.books.dataModel.first)
        #expect(try await library.authors.resolve(book.author) == nil)
        #expect(try await library.authors.resolve(book.author) == nil)
        #expect(recorder.errors.map(\.kind) == [.notFound], "reported once: \(recorder.errors)")
        // The message says what happened and the ways out, without claiming one cause.
        let message = try #require(recorder.errors.first).message
        for words in ["reference to LinkAuthor ann-dangling resolved to nil", "public/LinkAuthor has no record ann-dangling",
                      "never created", "scope of the record that holds the reference", "not committed yet",
                      "resolve again later", "deleted by a writer that does not apply the delete rules",
                      "left as they are", "change or remove the reference"] {
            #expect(message.contains(words), "\(words) in: \(message)")
        }
        #expect(library.authors.lastError?.kind == .notFound)
        #expect(library.books.dataModel.map(\.id) == ["b-dangling"], "the referring record is left alone")
    }

    @Test func aMirrorOfATypeWithRulesNeedsADatabaseThatEnforcesThem() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let error = await expectMirrorError(.unsupported) { try await Mirror<LinkBook>(database: database) }
        #expect(error?.message.contains("delete rules") == true)
        _ = try await Mirror<LinkAuthor>(database: database)  // no rules: fine
    }

    @Test(arguments: databases)
    func rulesAreStoredWhenTheReferringMirrorOpens(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        _ = try await Mirror<LinkBook>(database: opened.database)
        // Another writer that never opened LinkBook enforces them.
        let other = try await opened.otherWriter()
        let authors = try await Mirror<LinkAuthor>(database: other)
        let books = try await Mirror<LinkBook>(database: opened.database)
        authors.dataModel.append(LinkAuthor(id: "a", name: "A"))
        try await authors.flush()
        books.dataModel.append(LinkBook(id: "b", title: "t", author: Reference(recordID: "a")))
        try await books.flush()
        authors.dataModel.removeAll()
        try await authors.flush()
        try await waitUntil(books, "the book to go") { $0.isEmpty }
    }

    /// A folder in a tree of folders: deleting one deletes everything below it.
    struct Folder: Recordable {
        var id: String
        var parent: Reference<Folder>?
        static let deleteRules: [DeleteRule<Folder>] = [.cascade("parent", \.parent)]
    }

    @Test(arguments: databases)
    func aTypeThatRefersToItselfCascadesDownItsTree(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let folders = try await Mirror<Folder>(database: opened.database)
        folders.dataModel.append(contentsOf: [
            Folder(id: "root"), Folder(id: "a", parent: Reference(recordID: "root")),
            Folder(id: "a1", parent: Reference(recordID: "a")), Folder(id: "a1x", parent: Reference(recordID: "a1")),
            Folder(id: "b"), Folder(id: "b1", parent: Reference(recordID: "b")),
        ])
        try await folders.flush()
        folders.dataModel.remove(recordID: "a")
        try await folders.flush()
        try await waitUntil(folders, "a's subtree to go") { Set($0.map(\.id)) == ["root", "b", "b1"] }
        let other = try await opened.otherWriter()
        #expect(Set(try await other.fetchAll(in: .public(Folder.recordType)).records.map(\.id)) == ["root", "b", "b1"])
    }

    /// Rules and references stay in their scope space: a public rule does not reach a
    /// user's private records, and a private delete cascades within that user's records only.
    @Test(arguments: databases)
    func rulesStayInTheirScopeSpace(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try MirrorUser(name: "alice-\(UUID().uuidString.prefix(6))")
        let publicBooks = try await Mirror<LinkBook>(database: opened.database)
        publicBooks.dataModel.append(LinkBook(id: "public-book", title: "p", author: Reference(recordID: "ann")))
        try await publicBooks.flush()
        let privateAuthors = try await Mirror<LinkAuthor>(database: opened.database, scope: .private, user: alice)
        privateAuthors.dataModel.append(LinkAuthor(id: "ann", name: "Ann"))
        try await privateAuthors.flush()

        // Alice's author "ann" is not the public one; no private rule exists yet either.
        privateAuthors.dataModel.removeAll()
        try await privateAuthors.flush()
        #expect(publicBooks.dataModel.map(\.id) == ["public-book"])

        // With a private mirror of books, Alice's rules cascade within her records.
        let privateBooks = try await Mirror<LinkBook>(database: opened.database, scope: .private, user: alice)
        privateAuthors.dataModel.append(LinkAuthor(id: "bob", name: "Bob"))
        privateBooks.dataModel.append(LinkBook(id: "private-book", title: "q", author: Reference(recordID: "bob")))
        publicBooks.dataModel.append(LinkBook(id: "public-bob", title: "r", author: Reference(recordID: "bob")))
        try await privateAuthors.flush()
        try await privateBooks.flush()
        try await publicBooks.flush()
        privateAuthors.dataModel.removeAll()
        try await privateAuthors.flush()
        try await waitUntil(privateBooks, "alice's book to go") { $0.isEmpty }
        #expect(Set(publicBooks.dataModel.map(\.id)) == ["public-book", "public-bob"])
    }
}
