import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A live view sorted by the clock of each record's last change, the one the database
/// keeps (`StoredRecord.modified`), with no date field in the record (issue #36, point 7).
@Suite(.timeLimit(.minutes(5))) struct LiveViewModificationOrderTests {
    struct Note: Recordable {
        var id: String
        var text: String
    }

    private func ids(_ view: LiveView<Note>) -> [String] { view.records.map(\.id) }

    @Test func recentlyModifiedPutsEachChangeFirstLocalOrRemote() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Note>(database: database)
        for id in ["a", "b", "c"] { mirror.dataModel.append(Note(id: id, text: id)) }
        try await mirror.flush()
        let recent = mirror.view(sortedBy: .recentlyModified)
        let stale = mirror.view(sortedBy: .lastModified)
        #expect(ids(recent) == ["c", "b", "a"])
        #expect(ids(stale) == ["a", "b", "c"])

        mirror.dataModel[0].text = "a, edited"            // a local change, pending
        #expect(ids(recent) == ["a", "c", "b"])
        #expect(ids(stale) == ["b", "c", "a"])
        try await mirror.flush()
        #expect(ids(recent) == ["a", "c", "b"], "committing keeps the order")

        let b = try #require(try await database.fetch(["b"], in: .public("Note")).first)
        try await database.commit(
            [.save("b", fields: Data(#"{"id":"b","text":"b, remote"}"#.utf8), baseVersion: b.version,
                   timestamp: HybridLogicalClock.shared.now())],
            to: .public("Note"))
        _ = try await mirror.waitUntil("the remote edit") { $0.contains { $0.text == "b, remote" } }
        #expect(ids(recent) == ["b", "a", "c"])

        // Another process sees the same order, from the stored clocks.
        let other = try await Mirror<Note>(database: database.writer(named: "other"))
        #expect(ids(other.view(sortedBy: .recentlyModified)) == ["b", "a", "c"])
        #expect(ids(other.view(sortedBy: .lastModified, limit: 1)) == ["c"])
    }

    @Test func anEditIsAMoveToTheFrontAndAnUpdate() async throws {
        let mirror = try await Mirror<Note>(database: InMemoryDatabase())
        for id in ["a", "b"] { mirror.dataModel.append(Note(id: id, text: id)) }
        // (Edits before the creation is committed are part of it, with its clock.)
        try await mirror.flush()
        let recent = mirror.view(sortedBy: .recentlyModified)
        let changes = AsyncCollector(recent.changes())
        mirror.dataModel[0].text = "a, edited"
        try await changes.wait("the move and the update") { $0.count >= 2 }
        #expect(changes.items == [.moved(from: 1, to: 0), .updated(at: 0)])
    }
}
