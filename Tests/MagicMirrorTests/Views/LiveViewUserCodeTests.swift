import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// What a live view runs of yours (its filter, its order, records' `==`) runs with no lock
/// of the library held, so it may read the mirror and the view; and a pull shows in a view
/// whole (Views/LiveView.swift, "How a view changes").
@Suite(.timeLimit(.minutes(5))) struct LiveViewUserCodeTests {
    /// The mirror and view a filter or order reads, set once they exist.
    private final class Seen: Sendable {
        private struct Targets {
            var mirror: Mirror<Chore>?
            var view: LiveView<Chore>?
            var reads = 0
        }

        private let targets = Mutex(Targets())

        func set(_ mirror: Mirror<Chore>, _ view: LiveView<Chore>? = nil) {
            targets.withLock {
                $0.mirror = mirror
                $0.view = view
            }
        }

        /// Reads the mirror's records and the view, as user code may.
        func read() {
            let (mirror, view) = targets.withLock { ($0.mirror, $0.view) }
            guard let mirror else { return }
            _ = mirror.dataModel.count + (view?.count ?? 0) + (view?.records.count ?? 0)
            targets.withLock { $0.reads += 1 }
        }

        var reads: Int { targets.withLock { $0.reads } }
        var mirror: Mirror<Chore>? { targets.withLock { $0.mirror } }
    }

    /// Runs `body` on a thread of its own and waits for it with ``testTimeout``: a deadlock
    /// fails the test instead of hanging the suite.
    private func onItsOwnThread(_ what: String, _ body: @escaping @Sendable () -> Void) async throws {
        let done = AsyncCollector<Bool>()
        Thread.detachNewThread {
            body()
            done.append(true)
        }
        try await done.wait(forCount: 1, what)
    }

    private func save(_ id: String, rank: Int, done: Bool = false, at millis: Int64) -> RecordOperation {
        let json = #"{"id":"\#(id)","title":"t\#(rank)","notes":"","done":\#(done),"rank":\#(rank)}"#
        return .save(id, fields: Data(json.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: millis))
    }

    @Test func aFilterMayReadTheMirrorAndItsView() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        for rank in 0..<4 { mirror.dataModel.append(Chore(id: "c\(rank)", title: "t\(rank)", rank: rank)) }
        let seen = Seen()
        seen.set(mirror)
        let view = mirror.view(where: RecordFilter { chore in
            seen.read()
            return chore.rank % 2 == 0
        })
        seen.set(mirror, view)
        let changes = AsyncCollector(view.changes())
        try await onItsOwnThread("local edits through a filter that reads the mirror") {
            mirror.dataModel.append(Chore(id: "c4", title: "t4", rank: 4))
            mirror.dataModel[recordID: "c1"]?.rank = 10
            mirror.dataModel.remove(recordID: "c0")
        }
        #expect(view.records.map(\.id) == ["c1", "c2", "c4"])
        try await database.commit([save("r", rank: 6, at: 1)], to: .public("Chore"))
        try await changes.wait(forCount: 4, "the remote record in the view")
        #expect(view.records.map(\.id) == ["r", "c1", "c2", "c4"])  // created first
        #expect(seen.reads >= 9)
    }

    @Test func anOrderMayReadTheMirrorAndItsView() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        for rank in [3, 1, 2] { mirror.dataModel.append(Chore(id: "c\(rank)", title: "t\(rank)", rank: rank)) }
        let seen = Seen()
        seen.set(mirror)
        let view = mirror.view(sortedBy: RecordOrder { lhs, rhs in
            seen.read()
            return lhs.rank < rhs.rank
        })
        seen.set(mirror, view)
        #expect(view.records.map(\.rank) == [1, 2, 3])
        let changes = AsyncCollector(view.changes())
        try await onItsOwnThread("local edits through an order that reads the mirror") {
            mirror.dataModel.append(Chore(id: "c0", title: "t0", rank: 0))
            mirror.dataModel[recordID: "c3"]?.rank = -1
        }
        #expect(view.records.map(\.rank) == [-1, 0, 1, 2])
        try await database.commit([save("r", rank: 5, at: 1)], to: .public("Chore"))
        try await changes.wait(forCount: 4, "the remote record in the view")
        #expect(view.records.map(\.rank) == [-1, 0, 1, 2, 5])
        #expect(seen.reads > 0)
    }

    @Test func aFilterMayChangeTheMirror() async throws {
        let mirror = try await Mirror<Chore>(database: InMemoryDatabase())
        let seen = Seen()
        seen.set(mirror)
        // Each record it sees with a rank below 3 gets a follower one rank up.
        let view = mirror.view(where: RecordFilter { chore in
            if chore.rank < 3, let mirror = seen.mirror, mirror.dataModel[recordID: "f\(chore.rank + 1)"] == nil {
                mirror.dataModel.append(Chore(id: "f\(chore.rank + 1)", title: "follower", rank: chore.rank + 1))
            }
            return true
        })
        try await onItsOwnThread("an edit whose filter edits the mirror") {
            mirror.dataModel.append(Chore(id: "f0", title: "first", rank: 0))
        }
        #expect(mirror.dataModel.map(\.id) == ["f0", "f1", "f2", "f3"])
        #expect(view.records.map(\.id) == ["f0", "f1", "f2", "f3"])
    }

    /// Threads that change the mirror at once hand their changes to whichever of them is
    /// applying the view's: none is lost, and each shows in the view when its edit returns.
    @Test func changesFromManyThreadsEachShowWhenTheirEditReturns() async throws {
        let mirror = try await Mirror<Chore>(database: InMemoryDatabase())
        for rank in 0..<100 { mirror.dataModel.append(Chore(id: "c\(rank)", title: "t\(rank)", rank: rank)) }
        let view = mirror.view(where: \.done == false, sortedBy: \.rank)
        let misses = AsyncCollector<String>()
        let finished = AsyncCollector<Int>()
        for thread in 0..<4 {
            Thread.detachNewThread {
                for step in 0..<300 {
                    // Each thread edits its own records: ids whose number is `thread` mod 4.
                    let id = "c\((step * 4 + thread) % 100)"
                    let rank = 1_000 * (thread + 1) + step
                    mirror.dataModel[recordID: id]?.rank = rank
                    if !view.records.contains(where: { $0.id == id && $0.rank == rank }) {
                        misses.append("\(id) ranked \(rank)")
                    }
                }
                finished.append(thread)
            }
        }
        try await finished.wait(forCount: 4, "the four editing threads")
        #expect(misses.items.count == 0, "edits not in the view when they returned: \(misses.items.prefix(5))")
        let expected = mirror.dataModel.filter { !$0.done }.sorted { $0.rank < $1.rank }.map(\.id)
        #expect(view.records.map(\.id) == expected)
    }

    @Test func aPullShowsInAViewWholeToAnotherThread() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        let view = mirror.view(where: \.done == false)
        let total = 2_000
        let counts = AsyncCollector<Int>()
        let stop = AsyncCollector<Bool>()
        defer { stop.append(true) }
        Thread.detachNewThread {
            var last = -1
            while stop.items.isEmpty {
                let count = view.count
                if count != last {
                    counts.append(count)
                    last = count
                }
                if count >= total { break }
            }
        }
        try await counts.wait(forCount: 1, "the reader's first read")
        let operations = (0..<total).map { save("r\($0)", rank: $0, at: Int64(1_000 + $0)) }
        try await database.commit(operations, to: .public("Chore"))
        try await counts.wait("every record of the pull in the view") { $0.contains(total) }
        let partial = counts.items.filter { $0 != 0 && $0 != total }
        #expect(partial.isEmpty, "the reader saw \(partial.count) counts of a pull half applied: \(partial.prefix(5)), …")
        #expect(counts.items == [0, total])
        #expect(mirror.dataModel.count == total)
    }
}
