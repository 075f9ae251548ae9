import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import MirrorTestSupport
import MirrorTesting

/// `pg-mirror-worker --delete-author URL ID`: a process that knows only `LinkAuthor` (it
/// never opens a mirror of the types whose delete rules target it) removes one author
/// through its mirror and waits for the commit. Prints `ok` when the delete was stored, or
/// `refused IDS` when the database refused it.
enum DeleteAuthorWorker {
    static func run(url: String, authorID: String) async throws {
        let database = try await PostgreSQLDatabase(url: url)
        let authors = try await Mirror<LinkAuthor>(database: database)
        _ = try await authors.waitUntil(timeout: .seconds(60), "author \(authorID)") { authors in
            authors.contains { $0.id == authorID }
        }
        authors.dataModel.remove(recordID: authorID)
        FileHandle.standardError.write(Data("deleting \(authorID)\n".utf8))
        do {
            try await authors.flush()
            print("ok")
        } catch let error as MirrorError where error.kind == .refused {
            print("refused \(error.recordIDs.joined(separator: ","))")
        }
        await database.close()
    }
}
