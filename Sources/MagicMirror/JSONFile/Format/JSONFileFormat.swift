import Foundation

/// The JSON-file database's on-disk format: file names, and the encoders and parsers of
/// journal lines and snapshots. The spec is the `JSONFileFormat` DocC article.
///
/// A journal line is one changed record:
///
/// ```json
/// {"seq":7,"op":"save","id":"a1","version":2,"clock":"1763703120123-0","writer":"w-41-9f2c","end":true,"fields":{"title":"Milk"}}
/// ```
///
/// A snapshot is one JSON document written one record per line, so it can be read both as
/// JSON (`jq`) and line by line (recovery, speed).
enum JSONFileFormat {
    /// The version of the layout of snapshots, relationship rules and linked-commit intents,
    /// in their own `format` key: the one this library reads and writes.
    static let version = 1

    /// The database format (`database.json`'s `format`) of databases this library creates:
    /// 2, whose journals reserve space that appends overwrite in place (see
    /// ``journalReserve``). Versions from before append checksums refuse it.
    static let databaseFormat = 2

    /// The database formats this library opens: 1, written by versions that know nothing
    /// of append checksums and may share the directory (appends go at the end of the file,
    /// reserving nothing), and ``databaseFormat``.
    static let readableDatabaseFormats = 1...databaseFormat

    static let databaseFile = "database.json"
    static let snapshotFile = "snapshot.json"
    static let snapshotTemporaryFile = "snapshot.json.tmp"
    static let lockFile = "lock"
    static let publicDirectory = "public"
    static let privateDirectory = "private"
    static let sharedDirectory = "shared"

    /// The journal of a generation: `journal-<generation>.ndjson`.
    static func journalFile(_ generation: Int) -> String { "journal-\(generation).ndjson" }

    /// The generation of a journal file name, or `nil` for another name.
    static func generation(ofJournal name: String) -> Int? {
        guard name.hasPrefix("journal-"), name.hasSuffix(".ndjson") else { return nil }
        return Int(name.dropFirst("journal-".count).dropLast(".ndjson".count))
    }
}
