import Foundation
import MagicMirror
import Testing

/// Mirrors in several real processes (`mirror-worker mirror`) over one JSON-file database
/// converge with no code from the user: the database watches its zone directories, and each
/// process's mirrors pull what the others committed.
@Suite(.timeLimit(.minutes(5))) struct CrossProcessMirrorTests {
    typealias Todo = MirrorProcess.Todo

    /// The stored `Todo` records of a zone, sorted.
    private func stored(in directory: TemporaryDirectory, zone: ZoneID = .public("Todo")) async throws -> [Todo] {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        return try await database.fetchAll(in: zone).records.map { record in
            try JSONDecoder().decode(Todo.self, from: #require(record.fields))
        }.sorted()
    }

    @Test func aMirrorInAnotherProcessSeesAppendEditAndDelete() async throws {
        let directory = try TemporaryDirectory("processes-basic")
        defer { directory.remove() }
        let a = try await MirrorProcess("A", directory: directory)
        let b = try await MirrorProcess("B", directory: directory)
        let local = try await Mirror<Todo>(database: try JSONFileDatabase(directory: directory.url))
        let seen = AsyncCollector(local.changes())
        #expect(try JSONFileDatabase(directory: directory.url).watchMethod(of: .public("Todo")) == .native)

        try await a.send("add t1 buy milk")
        try await a.send("flush")
        let milk = Todo(id: "t1", title: "buy milk")
        try await b.waitForRecords("A's append") { $0 == [milk] }
        try await waitUntil(local, "A's append") { $0 == [milk] }

        try await a.send("edit t1 buy oat milk")
        try await a.send("flush")
        let oatMilk = Todo(id: "t1", title: "buy oat milk")
        try await b.waitForRecords("A's edit") { $0 == [oatMilk] }
        try await waitUntil(local, "A's edit") { $0 == [oatMilk] }

        try await a.send("delete t1")
        try await a.send("flush")
        try await b.waitForRecords("A's delete") { $0.isEmpty }
        try await waitUntil(local, "A's delete") { $0.isEmpty }

        // And back: B's change reaches A.
        try await b.send("add t2 from B")
        try await b.send("flush")
        let fromB = Todo(id: "t2", title: "from B")
        try await a.waitForRecords("B's append") { $0 == [fromB] }
        try await waitUntil(local, "B's append") { $0 == [fromB] }

        // Each change of another process arrived once, committed.
        try await seen.wait(forCount: 4, "four changes")
        #expect(seen.items == [
            MirrorChange(kind: .inserted, recordID: "t1", record: milk, origin: .remote, state: .committed),
            MirrorChange(kind: .updated, recordID: "t1", record: oatMilk, origin: .remote, state: .committed),
            MirrorChange(kind: .removed, recordID: "t1", record: nil, origin: .remote, state: .committed),
            MirrorChange(kind: .inserted, recordID: "t2", record: fromB, origin: .remote, state: .committed),
        ])
        #expect(try await a.quit() == 0)
        #expect(try await b.quit() == 0)
    }

    @Test func threeProcessesWritingConcurrentlyEndWithIdenticalArrays() async throws {
        let directory = try TemporaryDirectory("processes-three")
        defer { directory.remove() }
        var workers: [MirrorProcess] = []
        for name in ["A", "B", "C"] { workers.append(try await MirrorProcess(name, directory: directory)) }
        try await workers[0].send("add shared first")
        try await workers[0].send("flush")
        for worker in workers {
            try await worker.waitForRecords("the shared record") { $0.contains { $0.id == "shared" } }
        }

        // Each adds records, edits the shared one (a conflict the policy settles), and
        // deletes one of its own, all at the same time.
        let perWorker = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in workers {
                group.addTask {
                    for index in 0..<perWorker {
                        try await worker.send("add \(worker.name)\(index) \(worker.name)'s \(index)")
                        if index % 5 == 4 {
                            try await worker.send("edit shared \(worker.name) at \(index)")
                            try await worker.send("flush")
                        }
                    }
                    try await worker.send("delete \(worker.name)0")
                    try await worker.send("flush")
                }
            }
            try await group.waitForAll()
        }

        let expected = try await stored(in: directory)
        #expect(expected.count == 3 * (perWorker - 1) + 1)
        #expect(expected.contains { $0.id == "shared" && $0.title != "first" })
        for worker in workers {
            try await worker.waitForRecords("every process's changes") { $0.sorted() == expected }
        }
        let local = try await Mirror<Todo>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(local.dataModel.array.sorted() == expected)
        for worker in workers { #expect(try await worker.quit() == 0) }
    }

    @Test func aMirrorKeepsReceivingChangesAcrossCompactions() async throws {
        let directory = try TemporaryDirectory("processes-compaction")
        defer { directory.remove() }
        // A small threshold makes A compact by itself too, renaming files under B's watch.
        let a = try await MirrorProcess("A", directory: directory, ["--compaction-threshold", "2048", "--relaxed"])
        let b = try await MirrorProcess("B", directory: directory)
        let database = try JSONFileDatabase(directory: directory.url)
        let local = try await Mirror<Todo>(database: database)
        let padding = String(repeating: "p", count: 80)
        var expected: [Todo] = []
        for round in 0..<4 {
            for index in 0..<8 {
                let todo = Todo(id: "r\(round)-\(index)", title: "\(padding) \(round) \(index)")
                try await a.send("add \(todo.id) \(todo.title)")
                expected.append(todo)
            }
            try await a.send("flush")
            try await a.send("compact")
            try await a.send("add after\(round) after compaction \(round)")
            try await a.send("flush")
            expected.append(Todo(id: "after\(round)", title: "after compaction \(round)"))
            let sorted = expected.sorted()
            try await b.waitForRecords("round \(round)") { $0.sorted() == sorted }
            try await waitUntil(local, "round \(round)") { $0.sorted() == sorted }
        }
        let generation = try await database.currentToken(in: .public("Todo")).generation
        #expect(generation >= 4, "every round compacted at least once")
        #expect(try await a.quit() == 0)
        #expect(try await b.quit() == 0)
    }

    @Test func aReaderStartedAfterManyChangesLoadsAllOfThem() async throws {
        let directory = try TemporaryDirectory("processes-late-reader")
        defer { directory.remove() }
        let writer = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(durability: .relaxed, compactionThreshold: 16_384))
        let zone = ZoneID.public("Todo")
        var expected: [String: Todo] = [:]
        var versions: [String: Int] = [:]
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for batch in 0..<60 {
            var operations: [RecordOperation] = []
            for index in 0..<10 {
                let todo = Todo(id: "r\(batch * 10 + index)", title: "first \(batch * 10 + index)")
                operations.append(.save(
                    todo.id, fields: try encoder.encode(todo), baseVersion: 0, timestamp: HybridLogicalClock.shared.now()))
                expected[todo.id] = todo
                versions[todo.id] = 1
            }
            // Edit and delete some earlier records.
            if batch > 0 {
                let edited = "r\((batch - 1) * 10 + 3)"
                let todo = Todo(id: edited, title: "edited in batch \(batch)")
                operations.append(.save(
                    edited, fields: try encoder.encode(todo), baseVersion: 1, timestamp: HybridLogicalClock.shared.now()))
                expected[edited] = todo
                let deleted = "r\((batch - 1) * 10 + 7)"
                operations.append(.delete(deleted, baseVersion: 1, timestamp: HybridLogicalClock.shared.now()))
                expected[deleted] = nil
            }
            let outcome = try await writer.commit(operations, to: zone)
            #expect(outcome.isApplied)
        }
        try await writer.waitForBackgroundWork(in: zone)
        #expect(try await writer.currentToken(in: zone).generation >= 1, "the zone was compacted")

        let reader = try await MirrorProcess("late reader", directory: directory)
        let all = expected.values.sorted()
        #expect(reader.records.sorted() == all)
        #expect(all.count == 600 - 59)
        #expect(try await reader.quit() == 0)
    }

    @Test func aPrivateMirrorInAnotherProcessFollowsItsUserSession() async throws {
        let directory = try TemporaryDirectory("processes-user-switch")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let carols = [Todo(id: "c1", title: "carol's")]
        try await seed(carols, into: database, zone: .private("Todo", user: "carol"))

        // The worker's private mirror starts with the account running it, then follows
        // `UserSession.shared` of its process.
        let worker = try await MirrorProcess("private", directory: directory, ["--private"])
        try await worker.send("add mine the owner's")
        try await worker.send("flush")
        try await worker.send("switch-user carol")
        try await worker.waitForRecords("carol's records") { $0 == carols }
        try await worker.send("add c2 added for carol")
        try await worker.send("flush")

        let owner = MirrorUser.processOwner().name
        #expect(try await stored(in: directory, zone: .private("Todo", user: owner)) == [Todo(id: "mine", title: "the owner's")])
        #expect(try await stored(in: directory, zone: .private("Todo", user: "carol"))
            == carols + [Todo(id: "c2", title: "added for carol")])
        #expect(try await worker.quit() == 0)
    }
}

/// Saves records into a zone directly, as another program would.
func seed<Record: Recordable>(_ records: [Record], into database: any RecordDatabase, zone: ZoneID) async throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let operations = try records.map { record in
        RecordOperation.save(
            record.recordID, fields: try encoder.encode(record), baseVersion: 0,
            timestamp: HybridLogicalClock.shared.now())
    }
    try await database.commit(operations, to: zone)
}
