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

    /// Threads that change the mirror at once work their changes out in rounds: none is
    /// lost, and each shows in the view when its edit returns.
    @Test func changesFromManyThreadsEachShowWhenTheirEditReturns() async throws {
        let mirror = try await Mirror<Chore>(database: InMemoryDatabase())
        for rank in 0..<100 { mirror.dataModel.append(Chore(id: "c\(rank)", title: "t\(rank)", rank: rank)) }
        let view = mirror.view(where: \.done == false, sortedBy: \.rank)
        let (threads, steps) = (4, 150)
        let start = StartLine(runners: threads)
        let misses = AsyncCollector<String>()
        let finished = AsyncCollector<Int>()
        for thread in 0..<threads {
            Thread.detachNewThread {
                // All at once, so that their rounds overtake one another.
                start.arrive()
                for step in 0..<steps {
                    // Each thread edits its own records: ids whose number is `thread` mod 4.
                    let id = "c\((step * threads + thread) % 100)"
                    let rank = 1_000 * (thread + 1) + step
                    mirror.dataModel[recordID: id]?.rank = rank
                    if !view.records.contains(where: { $0.id == id && $0.rank == rank }) {
                        misses.append("\(id) ranked \(rank)")
                    }
                }
                finished.append(thread)
            }
        }
        try await finished.wait(forCount: threads, "the editing threads")
        #expect(misses.items.count == 0, "edits not in the view when they returned: \(misses.items.prefix(5))")
        let expected = mirror.dataModel.filter { !$0.done }.sorted { $0.rank < $1.rank }.map(\.id)
        #expect(view.records.map(\.id) == expected)
        #expect(view.records.map(\.rank) == expected.map { id in mirror.dataModel[recordID: id]?.rank ?? -1 })
    }

    /// An edit made while another thread works a change of the view out (here, stopped in
    /// the view's filter) shows in the view when it returns, without waiting for that
    /// thread: an async caller, on Swift's cooperative pool, is never blocked by a view.
    @Test func anEditDoesNotWaitForAThreadWorkingOutAnotherChange() async throws {
        let mirror = try await Mirror<Chore>(database: InMemoryDatabase())
        for rank in 0..<3 { mirror.dataModel.append(Chore(id: "c\(rank)", title: "t\(rank)", rank: rank)) }
        let gate = Gate()
        let view = mirror.view(where: RecordFilter { chore in
            if chore.id == "c0", chore.rank == 100 { gate.holdFirstCaller() }
            return true
        }, sortedBy: \.rank)
        let shownWhenReturned = AsyncCollector<Bool>()
        Thread.detachNewThread {
            mirror.dataModel[recordID: "c0"]?.rank = 100
            shownWhenReturned.append(view.records.contains { $0.id == "c0" && $0.rank == 100 })
        }
        try await gate.stopped.wait(forCount: 1, "the first thread stopped in the filter")
        // This task's edit: the first thread is still inside its filter.
        mirror.dataModel[recordID: "c1"]?.rank = 50
        #expect(view.records.contains { $0.id == "c1" && $0.rank == 50 })
        #expect(view.records.map(\.id) == ["c2", "c1", "c0"])
        gate.open()
        try await shownWhenReturned.wait(forCount: 1, "the first thread's edit to return")
        #expect(gate.letGo.items == [true], "the first thread was let go by open(), not by its minute running out")
        #expect(shownWhenReturned.items == [true])
        #expect(view.records.map(\.rank) == [2, 50, 100])
    }

    /// A pull's records show all at once: the view's filter, run for each pulled record
    /// while the pull is worked out, reads the view as any other thread would see it then.
    @Test func aPullShowsInAViewWhole() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        let seen = Mutex<LiveView<Chore>?>(nil)
        let counts = AsyncCollector<Int>()
        let view = mirror.view(where: RecordFilter { chore in
            if let view = seen.withLock({ $0 }) { counts.append(view.count) }
            return !chore.done
        })
        seen.withLock { $0 = view }
        let changes = AsyncCollector(view.changes())
        let total = 500
        let operations = (0..<total).map { save("r\($0)", rank: $0, at: Int64(1_000 + $0)) }
        try await database.commit(operations, to: .public("Chore"))
        try await changes.wait(forCount: total, "every pulled record in the view")
        #expect(view.count == total)
        #expect(mirror.dataModel.count == total)
        let partial = counts.items.filter { $0 != 0 }
        #expect(counts.items.count >= total, "the filter ran for every pulled record")
        #expect(partial.isEmpty, "a pull half shown: \(partial.count) reads, first \(partial.prefix(5))")
        seen.withLock { $0 = nil }
    }
}

/// Lets threads go together: each waits in ``arrive()`` until `runners` have arrived.
private final class StartLine: Sendable {
    private let arrived = Mutex(0)
    private let condition = NSCondition()
    private let runners: Int

    init(runners: Int) { self.runners = runners }

    func arrive() {
        condition.lock()
        defer { condition.unlock() }
        let count = arrived.withLock { count in
            count += 1
            return count
        }
        if count == runners { condition.broadcast() }
        let deadline = Date(timeIntervalSinceNow: 60)
        while arrived.withLock({ $0 }) < runners, condition.wait(until: deadline) {}
    }
}

/// Stops the first thread that calls ``holdFirstCaller()`` until ``open()`` (at most a
/// minute) and lets the others through: ``stopped`` gets `true` when that thread stops,
/// ``letGo`` whether ``open()`` let it go (`false`: the minute ran out).
private final class Gate: Sendable {
    let stopped = AsyncCollector<Bool>()
    let letGo = AsyncCollector<Bool>()
    private let state = Mutex((entered: false, opened: false))
    private let condition = NSCondition()

    func holdFirstCaller() {
        let first = state.withLock { state in
            defer { state.entered = true }
            return !state.entered
        }
        guard first else { return }
        condition.lock()
        defer { condition.unlock() }
        stopped.append(true)
        let deadline = Date(timeIntervalSinceNow: 60)
        while !state.withLock({ $0.opened }), condition.wait(until: deadline) {}
        letGo.append(state.withLock { $0.opened })
    }

    func open() {
        condition.lock()
        defer { condition.unlock() }
        state.withLock { $0.opened = true }
        condition.broadcast()
    }
}
