import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Moving records in a view sorted by a stored key (fractional indexing): the new order is
/// stored, every mirror shows it, and concurrent moves converge.
@Suite(.timeLimit(.minutes(5))) struct LiveViewMoveTests {
    struct Card: Recordable {
        var id: String
        var position: Double
    }

    private func ids(_ view: LiveView<Card>) -> [String] { view.records.map(\.id) }

    @Test func aMoveIsStoredAndEveryMirrorShowsIt() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Card>(database: database)
        for (index, id) in ["a", "b", "c", "d"].enumerated() { mirror.dataModel.append(Card(id: id, position: Double(index))) }
        let view = mirror.view(sortedBy: \.position)
        let changes = AsyncCollector(view.changes())
        view.move(from: 3, to: 0, orderKey: \.position)      // d to the front
        #expect(ids(view) == ["d", "a", "b", "c"])
        view.move(from: 0, to: 2, orderKey: \.position)      // d between b and c
        #expect(ids(view) == ["a", "b", "d", "c"])
        view.move(from: 1, to: 3, orderKey: \.position)      // b to the end
        #expect(ids(view) == ["a", "d", "c", "b"])
        view.move(from: 2, to: 2, orderKey: \.position)      // nowhere
        #expect(ids(view) == ["a", "d", "c", "b"])
        try await changes.wait("three moves") { $0.count >= 6 }
        #expect(changes.items == [
            .moved(from: 3, to: 0), .updated(at: 0), .moved(from: 0, to: 2), .updated(at: 2),
            .moved(from: 1, to: 3), .updated(at: 3),
        ])
        try await mirror.flush()
        // Only the moved records changed.
        #expect(mirror.dataModel.first { $0.id == "a" }?.position == 0)
        let other = try await Mirror<Card>(database: database.writer(named: "other"))
        #expect(ids(other.view(sortedBy: \.position)) == ["a", "d", "c", "b"])
    }

    @Test func concurrentMovesInTwoMirrorsConverge() async throws {
        let database = InMemoryDatabase()
        let first = try await Mirror<Card>(database: database)
        for (index, id) in ["a", "b", "c", "d", "e"].enumerated() { first.dataModel.append(Card(id: id, position: Double(index))) }
        try await first.flush()
        let second = try await Mirror<Card>(database: database.writer(named: "second"))
        let one = first.view(sortedBy: \.position)
        let two = second.view(sortedBy: \.position)
        // Meanwhile (whether or not one mirror saw the other's move yet): e to the front
        // here, d to the front and c after a there.
        func move(_ id: String, in view: LiveView<Card>, after neighbour: String?) throws {
            let source = try #require(ids(view).firstIndex(of: id))
            let target = try neighbour.map { try #require(ids(view).firstIndex(of: $0)) }
            let destination = target.map { $0 < source ? $0 + 1 : $0 } ?? 0
            view.move(from: source, to: destination, orderKey: \.position)
        }
        try move("e", in: one, after: nil)
        try move("d", in: two, after: nil)
        try move("c", in: two, after: "a")
        try await first.flush()
        try await second.flush()
        // d and e took the same key (creation order breaks the tie), or d went before e
        // because the second mirror saw e's move first: the same order either way.
        let expected = ["d", "e", "a", "c", "b"]
        try await first.waitUntil(timeout: .seconds(120)) { _ in ids(one) == expected }
        try await second.waitUntil(timeout: .seconds(120)) { _ in ids(two) == expected }
        #expect(one.records == two.records)
        let third = try await Mirror<Card>(database: database.writer(named: "third"))
        #expect(ids(third.view(sortedBy: \.position)) == ids(one))
    }
}
