import Foundation
import MagicMirror
import MirrorTestSupport

/// `relationships`: one step of the relationship tests, in a process of its own, on a
/// JSON-file database.
///
/// ```
/// relationships --db DIR --action seed --author A --books N [--chapters C] [--editor E]
/// relationships --db DIR --action delete --author A [--crash-at OPERATION:CALL[:BYTES]]
/// relationships --db DIR --action edit --book B --times N
/// relationships --db DIR --action count --author A
/// ```
///
/// - `seed`: opens mirrors of every type (which registers their delete rules) and stores
///   author A with N books `A-b<i>`, each with C chapters `A-b<i>-c<j>` (default 0); with
///   `--editor`, also author E, the editor and only reviewer of every book.
/// - `delete`: opens only a `Mirror<LinkAuthor>` (never the referring types) and removes
///   author A; prints `deleted` once `flush()` returned, or `refused <ids>` and, after the
///   mirror shows the author again, `shown <count>`.
/// - `edit`: retitles book B N times through a `Mirror<LinkBook>`, flushing each time; prints
///   `edited <n>` after each; stops early, printing `gone`, once the book is deleted.
/// - `count`: opens the database (replaying what a killed writer left) and prints
///   `authors <n> books <n> chapters <n>` for author A.
enum RelationshipCommand {
    static let usage = "relationships --db DIR --action seed|delete|edit|count [--author A] [--books N] "
        + "[--chapters C] [--book B] [--times N] [--crash-at OPERATION:CALL[:BYTES]]"

    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, usage: usage)
        let database = try options.openDatabase(try options.required("db"))
        switch try options.required("action") {
        case "seed":
            let author = try options.required("author")
            let books = try options.int("books", default: 1)
            let chapters = try options.int("chapters", default: 0)
            let editor = options.string("editor")
            let authors = try await Mirror<LinkAuthor>(database: database)
            let bookMirror = try await Mirror<LinkBook>(database: database)
            let chapterMirror = try await Mirror<LinkChapter>(database: database)
            _ = try await Mirror<LinkAward>(database: database)
            authors.dataModel.append(LinkAuthor(id: author, name: author))
            if let editor { authors.dataModel.append(LinkAuthor(id: editor, name: editor)) }
            let reference = Reference<LinkAuthor>(recordID: author)
            let edited = editor.map { Reference<LinkAuthor>(recordID: $0) }
            bookMirror.dataModel.append(contentsOf: (0..<books).map {
                LinkBook(
                    id: "\(author)-b\($0)", title: "book \($0)", author: reference, editor: edited,
                    reviewers: edited.map { [$0] } ?? [])
            })
            chapterMirror.dataModel.append(contentsOf: (0..<books).flatMap { book in
                (0..<chapters).map { LinkChapter(id: "\(author)-b\(book)-c\($0)", book: Reference(recordID: "\(author)-b\(book)")) }
            })
            try await authors.flush()
            try await bookMirror.flush()
            try await chapterMirror.flush()
            emitLine("seeded")
        case "delete":
            let author = try options.required("author")
            let authors = try await Mirror<LinkAuthor>(database: database)
            try options.armCrash()
            authors.dataModel.remove(recordID: author)
            // A refusal that lands before flush() starts waiting is not thrown by it: look at
            // the mirror's last error too.
            var refusal: MirrorError?
            do {
                try await authors.flush()
            } catch let error as MirrorError where error.kind == .refused {
                refusal = error
            }
            if let refusal = refusal ?? authors.lastError.flatMap({ $0.kind == .refused ? $0 : nil }) {
                emitLine("refused \(refusal.recordIDs.joined(separator: ","))")
                try await waitForRecords(authors, timeout: .seconds(30), "the author to be shown again") { records in
                    records.contains { $0.id == author }
                }
                emitLine("shown \(authors.dataModel.filter { $0.id == author }.count)")
            } else {
                emitLine("deleted")
            }
        case "edit":
            let id = try options.required("book")
            let times = try options.int("times", default: 1)
            let books = try await Mirror<LinkBook>(database: database)
            for round in 1...max(1, times) {
                guard var book = books.dataModel[recordID: id] else {
                    emitLine("gone")
                    return
                }
                book.title = "edit \(round)"
                books.dataModel[recordID: id] = book
                try await books.flush()
                emitLine("edited \(round)")
            }
        case "count":
            let author = try options.required("author")
            let editor = options.string("editor")
            let authors = try await Mirror<LinkAuthor>(database: database)
            let books = try await Mirror<LinkBook>(database: database)
            let chapters = try await Mirror<LinkChapter>(database: database)
            let ownBooks = books.dataModel.filter { $0.author.recordID == author }
            let ownChapters = chapters.dataModel.filter { $0.id.hasPrefix(author + "-") }
            emitLine("authors \(authors.dataModel.filter { $0.id == author }.count) books \(ownBooks.count) "
                + "chapters \(ownChapters.count)")
            if let editor {
                for book in ownBooks.sorted(by: { $0.id < $1.id }) {
                    let edited = book.editor?.recordID == editor || book.reviewers.contains { $0.recordID == editor }
                    emitLine("book \(book.id) title \(book.title) edited-by-\(editor) \(edited)")
                }
            }
        default:
            throw WorkerUsageError(usage)
        }
    }
}
