import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Observation
import Synchronization
import Testing

/// Live views (Views/): filters, orders and limits that stay up to date with every local
/// and remote change, their positions of change, writing through them and observing them.
@Suite(.timeLimit(.minutes(5))) struct LiveViewTests {
    private func chores(_ count: Int) -> [Chore] {
        (0..<count).map { Chore(id: "c\($0)", title: "t\($0)", done: $0 % 2 == 1, rank: $0) }
    }

    private func mirror(with records: [Chore]) async throws -> (InMemoryDatabase, Mirror<Chore>) {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        for record in records { mirror.dataModel.append(record) }
        return (database, mirror)
    }

    @Test func filterSortAndLimitShowTheRightRecords() async throws {
        let (_, mirror) = try await mirror(with: chores(10).shuffled())
        let open = mirror.view(where: \.done == false, sortedBy: .descending(\.rank), limit: 3)
        #expect(open.records.map(\.rank) == [8, 6, 4])
        #expect(open.count == 3)
        #expect(open[1].rank == 6)
        let all = mirror.view()
        #expect(all.records == mirror.dataModel.array)
        let some = mirror.view(where: \.rank >= 3 && \.rank < 6 || \.title == "t9", sortedBy: \.rank)
        #expect(some.records.map(\.rank) == [3, 4, 5, 9])
        let closure = mirror.view(where: RecordFilter { $0.title.hasSuffix("7") })
        #expect(closure.records.map(\.rank) == [7])
        #expect(mirror.view(where: !(\.done == false), limit: 0).isEmpty)
        #expect(mirror.view(where: \.title != "t0" && \.rank <= 2, sortedBy: \.rank).records.map(\.rank) == [1, 2])
        #expect(mirror.view(where: \.rank > 7, sortedBy: .descending(\.rank)).records.map(\.rank) == [9, 8])
        #expect(mirror.view(sortedBy: RecordOrder { $0.title.count > $1.title.count }, limit: 2).count == 2)
    }

    @Test func aRecordEditedEntersMovesWithinAndLeavesTheView() async throws {
        let (_, mirror) = try await mirror(with: chores(6))
        // Open chores by rank: c0, c2, c4 (ranks 0, 2, 4).
        let view = mirror.view(where: \.done == false, sortedBy: \.rank)
        let changes = AsyncCollector(view.changes())
        let c3 = try #require(mirror.dataModel.firstIndex(ofRecordID: "c3"))
        mirror.dataModel[c3].done = false                  // enters between c2 and c4
        #expect(view.records.map(\.id) == ["c0", "c2", "c3", "c4"])
        mirror.dataModel[c3].rank = -1                     // moves to the front
        #expect(view.records.map(\.id) == ["c3", "c0", "c2", "c4"])
        mirror.dataModel[c3].title = "renamed"             // changes in place
        mirror.dataModel[c3].done = true                   // leaves
        #expect(view.records.map(\.id) == ["c0", "c2", "c4"])
        let expected: [LiveViewChange] = [
            .inserted(at: 2), .moved(from: 2, to: 0), .updated(at: 0), .updated(at: 0), .removed(at: 0),
        ]
        try await changes.wait("the five changes") { $0.count >= 5 }
        #expect(changes.items == expected)
    }

    @Test func aLimitStaysLive() async throws {
        let (_, mirror) = try await mirror(with: chores(10))
        let firstThree = mirror.view(where: \.done == false, sortedBy: \.rank, limit: 3)
        let changes = AsyncCollector(firstThree.changes())
        #expect(firstThree.records.map(\.rank) == [0, 2, 4])
        mirror.dataModel.removeRecord(withID: "c2")                     // the next one moves up
        #expect(firstThree.records.map(\.rank) == [0, 4, 6])
        mirror.dataModel.append(Chore(id: "new", title: "new", rank: 1))  // pushes the last out
        #expect(firstThree.records.map(\.rank) == [0, 1, 4])
        mirror.dataModel.append(Chore(id: "late", title: "late", rank: 100))  // beyond the limit
        let last = try #require(mirror.dataModel.firstIndex(ofRecordID: "late"))
        mirror.dataModel[last].rank = 3                                  // moves into it
        #expect(firstThree.records.map(\.rank) == [0, 1, 3])
        let expected: [LiveViewChange] = [
            .removed(at: 1), .inserted(at: 2), .inserted(at: 1), .removed(at: 3), .inserted(at: 2), .removed(at: 3),
        ]
        try await changes.wait("six changes") { $0.count >= 6 }
        #expect(changes.items == expected)
    }

    @Test func remoteChangesUpdateTheView() async throws {
        let (database, mirror) = try await mirror(with: chores(4))
        try await mirror.flush()
        let view = mirror.view(where: \.done == false, sortedBy: \.rank, limit: 2)
        #expect(view.records.map(\.id) == ["c0", "c2"])
        try await database.simulateSave(Chore(id: "r", title: "remote", rank: 1))
        try await mirror.waitUntil(timeout: .seconds(120)) { _ in view.records.map(\.id) == ["c0", "r"] }
        try await database.simulateSave(Chore(id: "c0", title: "t0", done: true, rank: 0))
        try await mirror.waitUntil(timeout: .seconds(120)) { _ in view.records.map(\.id) == ["r", "c2"] }
        try await database.simulateDelete(id: "r", in: .public("Chore"))
        try await mirror.waitUntil(timeout: .seconds(120)) { _ in view.records.map(\.id) == ["c2"] }
    }

    @Test func writingThroughAViewEditsTheMirror() async throws {
        let (database, mirror) = try await mirror(with: chores(4))
        let open = mirror.view(where: \.done == false, sortedBy: \.rank)
        open[0].notes = "edited"                       // edits the record
        #expect(mirror.dataModel.first { $0.id == "c0" }?.notes == "edited")
        open[0].done = true                            // leaves the view
        #expect(open.records.map(\.id) == ["c2"])
        open.append(Chore(id: "a", title: "appended", rank: 1))
        open.append(Chore(id: "hidden", title: "done already", done: true))
        #expect(open.records.map(\.id) == ["a", "c2"])
        #expect(mirror.dataModel.suffix(2).map(\.id) == ["a", "hidden"])
        let removed = open.remove(at: 1)
        #expect(removed.id == "c2")
        #expect(!mirror.dataModel.contains { $0.id == "c2" })
        try await mirror.flush()
        let stored = try await database.fetchAll(in: .public("Chore")).records.map(\.id).sorted()
        #expect(stored == ["a", "c0", "c1", "c3", "hidden"])
    }

    /// A value read from a view and set back after the view changed edits its own record,
    /// not the one now at that position.
    @Test func settingAnElementEditsTheRecordWithItsId() async throws {
        let (_, mirror) = try await mirror(with: chores(4))
        let view = mirror.view(sortedBy: \.rank)
        var first = view[0]
        #expect(first.id == "c0")
        mirror.dataModel[3].rank = -1                  // c3 is first now
        first.notes = "edited"
        view[0] = first
        #expect(mirror.dataModel.map(\.id) == ["c0", "c1", "c2", "c3"])
        #expect(mirror.dataModel.map(\.notes) == ["edited", "", "", ""])
        #expect(view.records.map(\.id) == ["c3", "c0", "c1", "c2"])
        // A new id replaces the record at the position.
        view[0] = Chore(id: "new", title: "replaces c3", rank: 10)
        #expect(mirror.dataModel.map(\.id) == ["c0", "c1", "c2", "new"])
        #expect(mirror.lastError == nil)
    }

    @Test func aViewIsObservable() async throws {
        let (_, mirror) = try await mirror(with: chores(4))
        let view = mirror.view(where: \.done == false)
        let fired = Mutex(0)
        withObservationTracking {
            _ = view.records
        } onChange: {
            fired.withLock { $0 += 1 }
        }
        mirror.dataModel.append(Chore(id: "done", title: "x", done: true))  // not in the view
        #expect(fired.withLock { $0 } == 0)
        mirror.dataModel.append(Chore(id: "open", title: "y"))
        #expect(fired.withLock { $0 } == 1)
    }

    @Test func aViewOfAPrivateMirrorFollowsAUserSwitch() async throws {
        let database = InMemoryDatabase()
        try await seed([Chore(id: "a1", title: "alice's", rank: 1)], into: database, zone: .private("Chore", user: "alice"))
        try await seed([Chore(id: "b1", title: "bob's", rank: 2)], into: database, zone: .private("Chore", user: "bob"))
        let session = UserSession(user: try MirrorUser(name: "alice"), notificationCenter: NotificationCenter())
        let mirror = try await Mirror<Chore>(
            database: database, scope: .private, configuration: MirrorConfiguration(userSession: session))
        let view = mirror.view(sortedBy: \.rank)
        #expect(view.records.map(\.id) == ["a1"])
        session.switchUser(to: try MirrorUser(name: "bob"))
        try await mirror.waitUntil(timeout: .seconds(120)) { _ in view.records.map(\.id) == ["b1"] }
    }

    @Test func aDeallocatedViewIsForgottenAndItsChangesEnd() async throws {
        let (_, mirror) = try await mirror(with: chores(2))
        var view: LiveView<Chore>? = mirror.view()
        let changes = AsyncCollector(view!.changes())
        view = nil
        try await changes.waitForEnd("the end of the changes of a deallocated view")
        mirror.dataModel.append(Chore(title: "after"))
        #expect(mirror.dataModel.count == 3)
    }

    /// Reading views on several threads while the mirror and a view are written on others
    /// neither deadlocks nor shows a torn state.
    @Test func viewsAreReadAndWrittenFromManyThreadsAtOnce() async throws {
        let (_, mirror) = try await mirror(with: chores(200))
        let view = mirror.view(where: \.done == false, sortedBy: \.rank, limit: 20)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    for _ in 0..<2_000 {
                        let records = view.records
                        #expect(records.count <= 20)
                        #expect(zip(records, records.dropFirst()).allSatisfy { $0.rank <= $1.rank })
                    }
                }
            }
            group.addTask {
                for step in 0..<1_000 { mirror.dataModel[step % 200].rank = (step * 7919) % 500 }
            }
            group.addTask {
                for step in 0..<500 where !view.isEmpty { view[0].notes = "edit \(step)" }
            }
        }
        #expect(view.records.count == 20)
        #expect(mirror.dataModel.count == 200)
        #expect(mirror.lastError == nil)
    }

    /// Many random changes, several views: each view always equals a fresh filter and
    /// stable sort of the mirror's records, and replaying its changes gives its records.
    @Test func randomChangesKeepEveryViewEqualToAFreshFilterAndSort() async throws {
        var random = SplitMix64(seed: 7)
        let (_, mirror) = try await mirror(with: [])
        struct Check {
            let view: LiveView<Chore>
            let isIncluded: (Chore) -> Bool
            let key: (Chore) -> Int
            let limit: Int?
            let changes: AsyncCollector<LiveViewChange>
        }
        func check(_ view: LiveView<Chore>, _ isIncluded: @escaping (Chore) -> Bool, _ key: @escaping (Chore) -> Int, _ limit: Int?) -> Check {
            Check(view: view, isIncluded: isIncluded, key: key, limit: limit, changes: AsyncCollector(view.changes()))
        }
        var checks = [
            check(mirror.view(), { _ in true }, { _ in 0 }, nil),
            check(mirror.view(where: \.done == false, sortedBy: \.rank, limit: 5), { !$0.done }, { $0.rank }, 5),
            check(mirror.view(sortedBy: .descending(\.rank)), { _ in true }, { -$0.rank }, nil),
            check(mirror.view(where: \.rank < 20, sortedBy: \.rank, limit: 1), { $0.rank < 20 }, { $0.rank }, 1),
        ]
        var next = 0
        for _ in 0..<1_500 {
            let count = mirror.dataModel.count
            switch random.next() % 10 {
            case 0...3 where count < 400 || count == 0:
                mirror.dataModel.append(Chore(id: "r\(next)", title: "x", done: random.next() % 3 == 0, rank: Int(random.next() % 50)))
                next += 1
            case 0...6 where count > 0:
                let index = Int(random.next() % UInt64(count))
                if random.next() % 2 == 0 {
                    mirror.dataModel[index].rank = Int(random.next() % 50)
                } else {
                    mirror.dataModel[index].done.toggle()
                }
            default:
                if count > 0 { mirror.dataModel.remove(at: Int(random.next() % UInt64(count))) }
            }
            let records = mirror.dataModel.array
            for check in checks {
                let expected = records.enumerated().filter { check.isIncluded($0.element) }
                    .sorted { (check.key($0.element), $0.offset) < (check.key($1.element), $1.offset) }
                    .prefix(check.limit ?? .max).map(\.element)
                #expect(check.view.records == Array(expected))
            }
        }
        // Replaying each view's changes from empty gives as many rows as it shows, each
        // position in range. The views go away first, which ends their change sequences.
        let finalCounts = checks.map(\.view.count)
        let collectors = checks.map(\.changes)
        checks.removeAll()
        for (collector, finalCount) in zip(collectors, finalCounts) {
            try await collector.waitForEnd("the end of a view's changes")
            var rows = 0
            for change in collector.items {
                switch change {
                case .inserted(let at):
                    #expect(at <= rows)
                    rows += 1
                case .removed(let at):
                    #expect(at < rows)
                    rows -= 1
                case .moved(let from, let to): #expect(from < rows && to < rows)
                case .updated(let at): #expect(at < rows)
                }
            }
            #expect(rows == finalCount)
        }
    }
}

extension RecordArray {
    mutating func removeRecord(withID id: String) {
        if let index = firstIndex(ofRecordID: id) { remove(at: index) }
    }
}
