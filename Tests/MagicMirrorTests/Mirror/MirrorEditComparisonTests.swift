import MagicMirror
import Testing

/// One mutation of `dataModel` (one `inout` access) is committed as the difference between
/// the records before it and after it, however many steps it takes, and even when it puts
/// another array in the place of the mirror's.
@Suite(.timeLimit(.minutes(5))) struct MirrorEditComparisonTests {
    private static let seeded = (0..<5).map { Chore(id: "c\($0)", title: "chore \($0)") }

    @Test(arguments: DatabaseFactory.all)
    func stepsThatEndWhereTheyStartedCommitNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed(Self.seeded, into: opened.database)
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: database)

        func wander(_ chores: inout RecordArray<Chore>) {
            let first = chores[0]
            chores[0].title = "changed"
            chores[0].id = "renamed"
            chores.swapAt(0, 4)
            chores.remove(at: 4)
            chores.insert(first, at: 0)
            chores.append(Chore(id: "c2", title: "a copy"))
            chores.removeLast()
            chores.sort { $0.id < $1.id }
        }
        wander(&mirror.dataModel)
        #expect(mirror.dataModel.array == Self.seeded)
        #expect(mirror.pendingChanges.isEmpty)
        try await mirror.flush()
        #expect(database.attempts.items.isEmpty, "nothing to commit")
    }

    @Test(arguments: DatabaseFactory.all)
    func swappingTheArrayOutCommitsTheDifference(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        try await seed(Self.seeded, into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)

        var other: RecordArray<Chore> = [Self.seeded[1], Chore(id: "n", title: "new")]
        func replace(_ chores: inout RecordArray<Chore>) {
            chores[0].done = true
            chores[1].title = "edited, then swapped out"
            swap(&chores, &other)
        }
        replace(&mirror.dataModel)
        #expect(mirror.dataModel.map(\.id) == ["c1", "n"])
        #expect(Set(mirror.pendingChanges.map(\.recordID)) == ["c0", "c2", "c3", "c4", "n"], "c1 is as it was")
        try await mirror.flush()
        let stored = try await storedRecords(Chore.self, in: opened.database)
        #expect(stored == ["c1": Self.seeded[1], "n": Chore(id: "n", title: "new")])
        #expect(other.first?.done == true, "the mirror's array went to the other variable")
    }
}
