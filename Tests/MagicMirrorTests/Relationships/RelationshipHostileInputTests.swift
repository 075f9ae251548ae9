import Foundation
@testable import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// What other programs may write: references to record types that do not exist, ids that
/// are not names, rules and intent files changed behind MagicMirror's back. Each gets a clear
/// error and loses nothing else.
@Suite(.timeLimit(.minutes(5))) struct RelationshipHostileInputTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory("relationship-hostile") }

    private var spaceDirectory: URL { directory.url.appendingPathComponent("relationships/public") }

    private func open() throws -> JSONFileDatabase { try JSONFileDatabase(isolatedDirectory: directory.url) }

    /// Stores a book whose author field is `author` (raw JSON), as another program would.
    private func plantBook(_ id: String, author: String, in database: JSONFileDatabase) async throws {
        let fields = #"{"author":\#(author),"reviewers":[],"title":"planted"}"#
        try await database.commit(
            [.save(id, fields: Data(fields.utf8), baseVersion: 0, timestamp: HybridLogicalClock.shared.now())],
            to: .public("LinkBook"))
    }

    @Test(arguments: [
        #"{"recordType":"NoSuchType","recordID":"ann"}"#,
        #"{"recordType":"LinkAuthor","recordID":"a/b"}"#,
        #"{"recordType":"LinkAuthor","recordID":""}"#,
        #"{"recordType":"../LinkAuthor","recordID":"ann"}"#,
        #""ann""#,
        #"{"recordType":"LinkAuthor"}"#,
    ])
    func aHostileReferenceDoesNotDecodeIsReportedAndIsNeverFollowed(_ author: String) async throws {
        defer { directory.remove() }
        let database = try open()
        let authors = try await Mirror<LinkAuthor>(database: database)
        let books = try await Mirror<LinkBook>(database: database)
        authors.dataModel.append(LinkAuthor(id: "ann", name: "Ann"))
        books.dataModel.append(LinkBook(id: "good", title: "good", author: Reference(recordID: "ann")))
        try await authors.flush()
        try await books.flush()
        try await plantBook("hostile", author: author, in: database)

        let reopened = try await Mirror<LinkBook>(database: try open())
        #expect(reopened.dataModel.map(\.id) == ["good"], "the hostile book is skipped, the others load")
        #expect(reopened.lastError?.kind == .decodingFailed)
        #expect(reopened.lastError?.recordIDs == ["hostile"])

        // Deleting the author cascades to the good book only; the hostile one is left as it is.
        authors.dataModel.removeAll()
        try await authors.flush()
        try await waitUntil(books, "the good book to go") { $0.isEmpty }
        let stored = try await database.fetchAll(in: .public("LinkBook")).records
        #expect(stored.map(\.id) == ["hostile"])
    }

    @Test func aRulesFileChangedByAnotherProgramKeepsItsGoodRulesAndReportsTheRest() async throws {
        defer { directory.remove() }
        let database = try open()
        let books = try await Mirror<LinkBook>(database: database)
        let awards = try await Mirror<LinkAward>(database: database)
        let seeding = try await Mirror<LinkAuthor>(database: database)
        seeding.dataModel.append(contentsOf: [LinkAuthor(id: "ann", name: "Ann"), LinkAuthor(id: "bob", name: "Bob")])
        books.dataModel.append(LinkBook(id: "b", title: "t", author: Reference(recordID: "ann")))
        awards.dataModel.append(LinkAward(id: "prize", winner: Reference(recordID: "bob")))
        try await seeding.flush()
        try await books.flush()
        try await awards.flush()

        let rulesFile = spaceDirectory.appendingPathComponent("rules.ndjson")
        var lines = try String(contentsOf: rulesFile, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "a header and four rules: \(lines)")
        // Keep the award's deny rule; break the others in every way another program could.
        lines = lines.map { line in
            guard !line.contains("LinkAward"), !line.contains("format") else { return line }
            if line.contains("\"author\"") { return line.replacingOccurrences(of: "cascade", with: "explode") }
            if line.contains("\"editor\"") { return line.replacingOccurrences(of: "LinkBook", with: "../../etc") }
            return "{not json"
        }
        lines.append(#"{"action":"nullify","cardinality":"one","field":"winner","referringType":"LinkAward","targetType":"LinkAuthor"}"#)
        try Data(lines.joined(separator: "\n").utf8).write(to: rulesFile)

        // Another process, which opens only the authors, deletes both.
        let other = try open()
        let authors = try await Mirror<LinkAuthor>(database: other)
        authors.dataModel.removeAll()
        let failure = try await flushFailure(of: authors)
        // The deny rule holds; the broken cascade rule is gone: deleting ann leaves her book.
        #expect(failure.kind == .refused)
        #expect(failure.recordIDs == ["bob"])
        try await authors.flush()
        #expect(authors.dataModel.map(\.id) == ["bob"])
        #expect(try await other.fetchAll(in: .public("LinkBook")).records.map(\.id) == ["b"])
        let problem = try #require(other.problems.first { $0.file?.hasSuffix("rules.ndjson") == true })
        #expect(problem.kind == .corruptEntry)
        #expect(problem.message.contains("line 3, 4, 5, 6"), "\(problem.message)")

        // Opening the referring type's mirror writes its rules again.
        _ = try await Mirror<LinkBook>(database: try open())
        #expect(try other.deleteRules(in: .public("LinkBook")).count == 4)
    }

    @Test(arguments: [
        "garbage\n",
        #"{"format":1,"writer":"w1","clock":{"millis":1,"counter":0},"zones":1}"# + "\n",
        #"{"clock":{"counter":0,"millis":1},"format":1,"writer":"w1","zones":1}"# + "\n"
            + #"{"changes":[{"deletes":true,"nullifications":[],"recordID":"b"}],"records":0,"zone":{"recordType":"LinkBook","scope":"private","user":"mallory"}}"#
            + "\n" + #"{"end":true}"# + "\n",
        #"{"clock":{"counter":0,"millis":1},"format":1,"writer":"w1","zones":1}"# + "\n"
            + #"{"changes":[{"deletes":true,"nullifications":[],"recordID":"b"}],"records":0,"zone":{"recordType":"..","scope":"public"}}"#
            + "\n" + #"{"end":true}"# + "\n",
    ])
    func anIntentChangedByAnotherProgramIsSetAsideAndReported(_ intent: String) async throws {
        defer { directory.remove() }
        let database = try open()
        let authors = try await Mirror<LinkAuthor>(database: database)
        let books = try await Mirror<LinkBook>(database: database)
        authors.dataModel.append(LinkAuthor(id: "ann", name: "Ann"))
        books.dataModel.append(LinkBook(id: "b", title: "t", author: Reference(recordID: "ann")))
        try await authors.flush()
        try await books.flush()
        let intentFile = spaceDirectory.appendingPathComponent("intent.ndjson")
        try Data(intent.utf8).write(to: intentFile)

        let reopened = try open()
        let reread = try await Mirror<LinkBook>(database: reopened)
        #expect(reread.dataModel.map(\.id) == ["b"], "nothing was replayed")
        let problem = try #require(reopened.problems.first { $0.file?.hasSuffix("intent.ndjson") == true })
        #expect(problem.kind == .corruptEntry)
        #expect(!FileManager.default.fileExists(atPath: intentFile.path))
        let kept = try String(contentsOf: spaceDirectory.appendingPathComponent("intent.ndjson.corrupt"), encoding: .utf8)
        #expect(kept == intent, "its bytes are kept")
        // Deletes work on.
        let authorsThere = try await Mirror<LinkAuthor>(database: reopened)
        authorsThere.dataModel.removeAll()
        try await authorsThere.flush()
        try await waitUntil(reread, "the book to go") { $0.isEmpty }
    }
}
