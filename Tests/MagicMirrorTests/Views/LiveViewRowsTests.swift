import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A table driven by a view's changes shows the view's records (issue #36, point 6): a
/// re-sort moves the row and then reloads it, so the moved row does not keep its old value.
@Suite(.timeLimit(.minutes(5))) struct LiveViewRowsTests {
    struct Job: Recordable {
        var id: String
        var title: String
        var priority: Int
    }

    /// The rows of a table that applies changes as UIKit does: a moved row keeps the cell it
    /// had; an inserted or reloaded row asks the data source (the view's records now).
    private func applied(_ changes: [LiveViewChange], to rows: [String], source: [String]) -> [String] {
        var rows = rows
        for change in changes {
            switch change {
            case .inserted(let at): rows.insert(source[at], at: at)
            case .removed(let at): rows.remove(at: at)
            case .moved(let from, let to): rows.insert(rows.remove(at: from), at: to)
            case .updated(let at): rows[at] = source[at]
            }
        }
        return rows
    }

    @Test func aRecordThatMovesBecauseItChangedIsReloadedAtItsNewRow() async throws {
        let mirror = try await Mirror<Job>(database: InMemoryDatabase())
        mirror.dataModel.append(contentsOf: [
            Job(id: "a", title: "A", priority: 1), Job(id: "b", title: "B", priority: 2),
            Job(id: "c", title: "C", priority: 3),
        ])
        let view = mirror.view(sortedBy: \.priority)
        let before = view.records.map(\.title)
        let changes = AsyncCollector(view.changes())

        let c = try #require(mirror.dataModel.firstIndex(ofRecordID: "c"))
        mirror.dataModel[c].priority = 0          // re-sorted to the front…
        mirror.dataModel[c].title = "C, urgent"   // …and renamed there

        let expected = [
            LiveViewChange.moved(from: 2, to: 0), .updated(at: 0), .updated(at: 0),
        ]
        try await changes.wait("the move and the reloads") { $0.count >= expected.count }
        #expect(changes.items == expected)
        let source = view.records.map(\.title)
        #expect(applied(changes.items, to: before, source: source) == source)
    }

    @Test func aReSortAloneIsAMoveAndAReload() async throws {
        let mirror = try await Mirror<Job>(database: InMemoryDatabase())
        mirror.dataModel.append(contentsOf: [Job(id: "a", title: "A", priority: 1), Job(id: "b", title: "B", priority: 2)])
        let view = mirror.view(sortedBy: .descending(\.priority))
        let before = view.records.map(\.title)    // B, A
        let changes = AsyncCollector(view.changes())
        mirror.dataModel[0].priority = 5          // A to the front: its row shows the new priority
        try await changes.wait("the move and the reload") { $0.count >= 2 }
        #expect(changes.items == [.moved(from: 1, to: 0), .updated(at: 0)])
        #expect(applied(changes.items, to: before, source: view.records.map(\.title)) == ["A", "B"])
    }
}
