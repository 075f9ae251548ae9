import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// One order everywhere: a mirror's `dataModel` is in creation order (the stored creation
/// clock, then the id's bytes) on load, for remote appends and in every process; reorders
/// made locally stay local.
@Suite(.timeLimit(.minutes(5))) struct OrderTests {
    typealias Todo = MirrorProcess.Todo

    @Test func aReopenedMirrorIsInCreationOrderBeforeAndAfterCompaction() async throws {
        let directory = try TemporaryDirectory("order-reopen")
        defer { directory.remove() }
        let ids = ["b", "c", "a", "z", "m"]
        do {
            let mirror = try await Mirror<Todo>(database: try JSONFileDatabase(directory: directory.url))
            for id in ids { mirror.dataModel.append(Todo(id: id, title: "t-\(id)")) }
            try await mirror.flush()
            // Edits do not move a record.
            mirror.dataModel[0].title = "edited"
            try await mirror.flush()
        }
        let reopened = try await Mirror<Todo>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(reopened.dataModel.map(\.id) == ids)

        try await JSONFileDatabase(isolatedDirectory: directory.url).compact(.public("Todo"))
        let afterCompaction = try await Mirror<Todo>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(afterCompaction.dataModel.map(\.id) == ids)
    }

    /// A snapshot written before `created` existed reads each record as created at its
    /// `clock` (JSONFileFormat.md).
    @Test func aSnapshotRecordWithoutCreatedIsCreatedAtItsClock() async throws {
        let directory = try TemporaryDirectory("order-old-snapshot")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url)
        let zone = ZoneID.public("Todo")
        let first = RecordOperation.save("a", fields: Data(#"{"id":"a","title":"x"}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000))
        let edit = RecordOperation.save("a", fields: Data(#"{"id":"a","title":"y"}"#.utf8), baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000))
        try await database.commit([first], to: zone)
        try await database.commit([edit], to: zone)
        try await database.compact(zone)
        let snapshot = directory.url.appendingPathComponent("public/Todo/snapshot.json")
        let text = try String(contentsOf: snapshot, encoding: .utf8)
        #expect(text.contains(#""created":"1000-0""#))
        try text.replacingOccurrences(of: #","created":"1000-0""#, with: "").write(to: snapshot, atomically: false, encoding: .utf8)
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let record = try #require(try await reopened.fetch(["a"], in: zone).first)
        #expect(record.created == HLCTimestamp(millis: 2_000))
        #expect(record.modified == HLCTimestamp(millis: 2_000))
    }

    @Test func recordsCreatedInTheSameMillisecondAreOrderedByIdBytes() async throws {
        let database = InMemoryDatabase()
        let clock = HLCTimestamp(millis: 1_000)
        let operations = ["é", "b", "Z", "a"].map { id in
            RecordOperation.save(id, fields: Data(#"{"id":"\#(id)","title":"x"}"#.utf8), baseVersion: 0, timestamp: clock)
        }
        try await database.commit(operations, to: .public("Todo"))
        let mirror = try await Mirror<Todo>(database: database)
        #expect(mirror.dataModel.map(\.id) == ["Z", "a", "b", "é"])
    }

    @Test func aRemoteRecordGoesToItsCreationPlaceNotTheEnd() async throws {
        let database = InMemoryDatabase()
        let other = database.writer(named: "other")
        try await other.commit(
            [.save("first", fields: Data(#"{"id":"first","title":"x"}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000))],
            to: .public("Todo"))
        let mirror = try await Mirror<Todo>(database: database)
        mirror.dataModel.append(Todo(id: "mine", title: "local"))
        try await mirror.flush()
        // Made before "mine" by a writer whose commit arrives after it.
        try await other.commit(
            [.save("late", fields: Data(#"{"id":"late","title":"x"}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 2_000))],
            to: .public("Todo"))
        try await waitUntil(mirror, "the late record") { $0.count == 3 }
        #expect(mirror.dataModel.map(\.id) == ["first", "late", "mine"])
        let reopened = try await Mirror<Todo>(database: database)
        #expect(reopened.dataModel.map(\.id) == mirror.dataModel.map(\.id))
    }

    @Test func localReordersStayLocal() async throws {
        let directory = try TemporaryDirectory("order-local")
        defer { directory.remove() }
        let mirror = try await Mirror<Todo>(database: try JSONFileDatabase(directory: directory.url))
        for id in ["a", "b", "c"] { mirror.dataModel.append(Todo(id: id, title: id)) }
        try await mirror.flush()
        mirror.dataModel.sort { $0.id > $1.id }
        #expect(mirror.dataModel.map(\.id) == ["c", "b", "a"])
        #expect(mirror.pendingChanges.isEmpty)
        let reopened = try await Mirror<Todo>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(reopened.dataModel.map(\.id) == ["a", "b", "c"])
    }

    @Test func threeProcessesAgreeOnTheOrderAfterConcurrentAppendsAndAReopen() async throws {
        let directory = try TemporaryDirectory("order-three")
        defer { directory.remove() }
        var workers: [MirrorProcess] = []
        for name in ["A", "B", "C"] { workers.append(try await MirrorProcess(name, directory: directory)) }
        let perWorker = 15
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in workers {
                group.addTask {
                    // Ids that do not sort in creation order, so id order would differ.
                    for index in 0..<perWorker { try await worker.send("add \(99 - index)\(worker.name) n\(index)") }
                    try await worker.send("flush")
                }
            }
            try await group.waitForAll()
        }
        let total = perWorker * workers.count
        for worker in workers {
            try await worker.waitForRecords("every record", timeout: .seconds(120)) { $0.count == total }
        }
        let order = workers[0].records.map(\.id)
        for worker in workers.dropFirst() { #expect(worker.records.map(\.id) == order) }
        // Each writer's records are in the order it appended them.
        for worker in workers {
            let own = order.filter { $0.hasSuffix(worker.name) }
            #expect(own == (0..<perWorker).map { "\(99 - $0)\(worker.name)" })
        }
        let reopened = try await Mirror<Todo>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(reopened.dataModel.map(\.id) == order)
        let late = try await MirrorProcess("D", directory: directory)
        try await late.waitForRecords("every record") { $0.count == total }
        #expect(late.records.map(\.id) == order)
        for worker in workers + [late] { #expect(try await worker.quit() == 0) }
    }
}
