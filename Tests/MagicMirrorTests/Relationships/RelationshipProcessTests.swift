import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// Delete rules across real processes on one JSON-file database (`mirror-worker
/// relationships`): a process that never opened the referring types enforces their rules; a
/// denied delete is refused there and the record stays everywhere; a concurrent editor of a
/// referring record; SIGKILL at every step of a cascade, all or nothing after reopening.
@Suite(.timeLimit(.minutes(5))) struct RelationshipProcessTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory("relationship-processes") }

    /// Runs one `relationships` step to its end and returns its output lines.
    @discardableResult
    private func step(_ arguments: [String], expecting status: Int32 = 0,
                      sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
        let result = try await MirrorWorkerRun.run(["relationships", "--db", directory.path] + arguments)
        #expect(result.status == status, "\(arguments): \(result.standardError)", sourceLocation: sourceLocation)
        return result.standardOutput.split(separator: "\n").map(String.init)
    }

    @Test func aProcessThatNeverOpenedTheBooksCascadesToThemAndNullifiesTheRest() async throws {
        defer { directory.remove() }
        try await step(["--action", "seed", "--author", "ann", "--books", "3", "--chapters", "2"])
        try await step(["--action", "seed", "--author", "bob", "--books", "2", "--editor", "eve"])
        // This process watches with mirrors of its own.
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let books = try await Mirror<LinkBook>(database: database)
        let chapters = try await Mirror<LinkChapter>(database: database)
        #expect(books.dataModel.count == 5)
        #expect(chapters.dataModel.count == 6)

        #expect(try await step(["--action", "delete", "--author", "ann"]) == ["deleted"])
        try await waitUntil(books, "ann's books to go") { $0.allSatisfy { $0.author.recordID == "bob" } && $0.count == 2 }
        try await waitUntil(chapters, "their chapters to go") { $0.isEmpty }

        #expect(try await step(["--action", "delete", "--author", "eve"]) == ["deleted"])
        try await waitUntil(books, "eve to leave bob's books") { books in
            books.count == 2 && books.allSatisfy { $0.editor == nil && $0.reviewers.isEmpty }
        }
    }

    @Test func aDeniedDeleteInAnotherProcessIsRefusedThereAndTheAuthorStays() async throws {
        defer { directory.remove() }
        try await step(["--action", "seed", "--author", "ann", "--books", "1"])
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let awards = try await Mirror<LinkAward>(database: database)
        let authors = try await Mirror<LinkAuthor>(database: database)
        awards.dataModel.append(LinkAward(id: "prize", winner: Reference(recordID: "ann")))
        try await awards.flush()

        let lines = try await step(["--action", "delete", "--author", "ann"])
        #expect(lines == ["refused ann", "shown 1"], "the deleting mirror shows the author again")
        #expect(authors.dataModel.map(\.id) == ["ann"])
        #expect(try await step(["--action", "count", "--author", "ann"]) == ["authors 1 books 1 chapters 0"])
    }

    /// One process retitles the books that name `eve` as editor while another deletes her:
    /// every edit and the nullification both survive (the three-way merge by field), and the
    /// author's books, deleted by a cascade while being edited, stay deleted.
    @Test func aConcurrentEditorOfTheReferrersLosesNothingAndResurrectsNothing() async throws {
        defer { directory.remove() }
        try await step(["--action", "seed", "--author", "bob", "--books", "2", "--editor", "eve"])
        try await step(["--action", "seed", "--author", "ann", "--books", "1"])
        async let editingBob = step(["--action", "edit", "--book", "bob-b0", "--times", "20"])
        async let editingAnn = step(["--action", "edit", "--book", "ann-b0", "--times", "20"])
        async let deletingEve = step(["--action", "delete", "--author", "eve"])
        async let deletingAnn = step(["--action", "delete", "--author", "ann"])
        let (bobEdits, annEdits, eve, ann) = try await (editingBob, editingAnn, deletingEve, deletingAnn)
        #expect(eve == ["deleted"])
        #expect(ann == ["deleted"])
        #expect(bobEdits.last == "edited 20")
        #expect(annEdits.last == "gone" || annEdits.last == "edited 20", "\(annEdits)")

        let bob = try await step(["--action", "count", "--author", "bob", "--editor", "eve"])
        #expect(bob == [
            "authors 1 books 2 chapters 0",
            "book bob-b0 title edit 20 edited-by-eve false",
            "book bob-b1 title book 1 edited-by-eve false",
        ])
        #expect(try await step(["--action", "count", "--author", "ann"]) == ["authors 0 books 0 chapters 0"])
    }

    /// Where a writer deleting an author with 40 books of 5 chapters each is killed: before
    /// its intent is in place (nothing happens), or at any point after (all of it happens
    /// once the database is opened again).
    static let crashPoints: [(point: String, all: Bool)] = [
        ("write:1", false),      // writing the intent's temporary file
        ("fsync:1", false),      // flushing it
        ("rename:1", false),     // before the intent takes its name
        ("fsync:2", true),       // the intent in place, its directory not flushed
        ("write:2:100", true),   // the first zone's append torn after 100 bytes
        ("fsync:3", true),       // the first zone appended, not flushed
        ("fsync:4", true),       // the second zone appended
        ("fsync:5", true),       // the author's zone appended
        ("unlink:1", true),      // every zone written, the intent not removed
    ]

    @Test(arguments: crashPoints.indices)
    func aWriterKilledDuringACascadeLeavesAllOrNothing(_ index: Int) async throws {
        defer { directory.remove() }
        let (point, all) = Self.crashPoints[index]
        try await step(["--action", "seed", "--author", "ann", "--books", "40", "--chapters", "5"])
        let killed = try await step(["--action", "delete", "--author", "ann", "--crash-at", point], expecting: 137)
        #expect(killed.isEmpty, "killed at \(point) before it returned: \(killed)")

        let expected = all ? "authors 0 books 0 chapters 0" : "authors 1 books 40 chapters 200"
        #expect(try await step(["--action", "count", "--author", "ann"]) == [expected], "killed at \(point)")
        let intent = directory.url.appendingPathComponent("relationships/public/intent.ndjson")
        #expect(!FileManager.default.fileExists(atPath: intent.path), "the intent is gone after recovery")
        // And the database works on: the next delete of another author goes through.
        try await step(["--action", "seed", "--author", "bob", "--books", "2"])
        #expect(try await step(["--action", "delete", "--author", "bob"]) == ["deleted"])
        #expect(try await step(["--action", "count", "--author", "bob"]) == ["authors 0 books 0 chapters 0"])
    }
}
