import Foundation
import MirrorTesting
import Testing

@testable import MagicMirror

/// What a process that reads another's commits reads of the journal.
@Suite(.timeLimit(.minutes(5))) struct JournalReadOnceTests {
    private let zone = ZoneID.public("Chore")

    /// A reading process reads each byte another process appends to a zone's journal once,
    /// and little of the space reserved after it: its watcher's catch-up reads the append,
    /// and the read of the mirror it wakes finds nothing new. The journal's reserved space is
    /// read whole once, when it appears; after that each append written over it is read with
    /// a piece of the space after it. (Each catch-up used to read the whole reserved space
    /// left, up to 16 KiB for a 200-byte commit.)
    @Test func aReaderReadsEachNewJournalByteOnce() async throws {
        let directory = try TemporaryDirectory("reader")
        defer { directory.remove() }
        let reader = try JSONFileDatabase(directory: directory.url)
        let mirror = try await Mirror<Chore>(database: reader)
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let before = reader.journalBytesRead(in: zone)
        let commits = 5
        for number in 0..<commits {
            try await seed([Chore(id: "w\(number)", title: "from the writer")], into: writer)
            try await waitUntil(mirror, "the writer's chore \(number)") { $0.count == number + 1 }
        }
        _ = try await reader.fetchAll(in: zone)
        let journals = try FileManager.default.contentsOfDirectory(atPath: reader.directory(of: zone).path)
            .filter { $0.hasPrefix("journal") }
        #expect(journals.count == 1)
        let journal = try Data(contentsOf: reader.directory(of: zone).appendingPathComponent(try #require(journals.first)))
        let data = journal.count - journal.reversed().prefix { $0 == JSONFileFormat.reservedByte }.count
        let read = reader.journalBytesRead(in: zone) - before
        #expect(read >= data)
        #expect(
            read <= journal.count + commits * JSONFileZone.firstJournalPiece,
            "\(read) bytes read for \(data) bytes of commits in a journal of \(journal.count)")
    }

    /// An append whose first piece ends in spaces inside its line (a value full of spaces)
    /// is read whole: only spaces after the last complete line are taken for reserved space.
    @Test func spacesInsideALineAreNotReservedSpace() async throws {
        let directory = try TemporaryDirectory("reader-spaces")
        defer { directory.remove() }
        let reader = try JSONFileDatabase(directory: directory.url)
        let mirror = try await Mirror<Chore>(database: reader)
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let title = "a" + String(repeating: " ", count: 2 * JSONFileZone.firstJournalPiece) + "b"
        try await seed([Chore(id: "spaces", title: title)], into: writer)
        try await waitUntil(mirror, "the chore full of spaces") { $0.first?.title == title }
        let other = try await Mirror<Chore>(database: JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(other.dataModel.map(\.title) == [title])
    }
}
