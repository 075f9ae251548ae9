#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// An older and a newer version of one record type in real processes
/// (`mirror-worker versions`) on one JSON-file database: editing the same records loses
/// nothing, several newer processes migrate at once without conflicts, and a migration
/// killed midway resumes.
@Suite(.timeLimit(.minutes(5))) struct RecordVersionProcessTests {
    /// A `Task` as stored, whatever its version.
    struct StoredTask: Decodable, Equatable, CustomStringConvertible {
        var title: String
        var priority: Int?
        var schemaVersion: Int?
        enum CodingKeys: String, CodingKey {
            case title, priority
            case schemaVersion = "$schemaVersion"
        }
        var description: String { "\(title)/\(priority.map(String.init) ?? "-")/v\(schemaVersion ?? 1)" }
    }

    /// Every stored `Task`, by id, with its stored version.
    private func stored(in directory: TemporaryDirectory) async throws -> [String: (task: StoredTask, version: Int)] {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        var result: [String: (StoredTask, Int)] = [:]
        for record in try await database.fetchAll(in: .public("Task")).records {
            guard let fields = record.fields else { continue }
            result[record.id] = (try JSONDecoder().decode(StoredTask.self, from: fields), record.version)
        }
        return result
    }

    /// Stores `count` records the way the first version of the type does.
    private func seedVersion1(_ count: Int, in directory: TemporaryDirectory) async throws {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let operations = (0..<count).map { index in
            RecordOperation.save(
                "t\(index)", fields: Data(#"{"id":"t\#(index)","title":"task \#(index)"}"#.utf8), baseVersion: 0,
                timestamp: HybridLogicalClock.shared.now())
        }
        #expect(try await database.commit(operations, to: .public("Task")).isApplied)
    }

    @Test func anOlderAndANewerProcessEditTheSameRecordsAndLoseNothing() async throws {
        let directory = try TemporaryDirectory("versions-side-by-side")
        defer { directory.remove() }
        let newer = try await MirrorProcess("newer", schema: 2, directory: directory)
        let older = try await MirrorProcess("older", schema: 1, directory: directory)
        for (id, title, priority) in [("t1", "a", 3), ("t2", "b", 2), ("t3", "c", 1)] {
            try await newer.send("add \(id) \(title)")
            try await newer.send("priority \(id) \(priority)")
        }
        try await newer.send("flush")
        try await older.waitForState("the newer version's records") { $0.count == 3 }

        // Both edit t1 at once (one of the commits conflicts); the older one edits the rest.
        async let olderEdits: Void = {
            try await older.send("title t1 A")
            try await older.send("title t2 B")
            try await older.send("title t3 C")
            try await older.send("add t4 d")
            try await older.send("flush")
        }()
        async let newerEdit: Void = {
            try await newer.send("priority t1 7")
            try await newer.send("flush")
        }()
        _ = try await (olderEdits, newerEdit)

        try await newer.waitForState("every edit") { records in
            records.map { "\($0["id"]!)=\($0["title"]!)/\($0["priority"]!)" }
                == ["t1=A/7", "t2=B/2", "t3=C/1", "t4=d/0"]
        }
        try await older.waitForState("every edit") { records in
            records.map { "\($0["id"]!)=\($0["title"]!)" } == ["t1=A", "t2=B", "t3=C", "t4=d"]
        }
        let tasks = try await stored(in: directory).mapValues(\.task)
        #expect(tasks["t1"] == StoredTask(title: "A", priority: 7, schemaVersion: 2))
        #expect(tasks["t2"] == StoredTask(title: "B", priority: 2, schemaVersion: 2))
        #expect(tasks["t3"] == StoredTask(title: "C", priority: 1, schemaVersion: 2))
        // Written by the older version and never saved by the newer one: stored as it was.
        #expect(tasks["t4"] == StoredTask(title: "d", priority: nil, schemaVersion: nil))
        #expect(!newer.lines.items.contains { $0.hasPrefix("error ") }, "\(newer.lines.items)")
        #expect(!older.lines.items.contains { $0.hasPrefix("error ") }, "\(older.lines.items)")
        #expect(try await newer.quit() == 0)
        #expect(try await older.quit() == 0)
    }

    @Test func severalNewerProcessesMigrateAtOnceAndEachRecordIsRewrittenOnce() async throws {
        let directory = try TemporaryDirectory("versions-migrate-race")
        defer { directory.remove() }
        try await seedVersion1(300, in: directory)
        var processes: [MirrorProcess] = []
        for name in ["A", "B", "C"] {
            processes.append(try await MirrorProcess(name, schema: 2, directory: directory, ["--batch", "20"]))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for process in processes { group.addTask { try await process.send("migrate") } }
            try await group.waitForAll()
        }
        let counts = processes.map(\.migratedCount)
        #expect(counts.reduce(0, +) == 300, "\(counts)")
        let tasks = try await stored(in: directory)
        #expect(tasks.count == 300)
        #expect(tasks.values.allSatisfy { $0.version == 2 && $0.task.priority == 0 && $0.task.schemaVersion == 2 })
        for process in processes {
            #expect(!process.lines.items.contains { $0.hasPrefix("error ") }, "\(process.lines.items)")
            #expect(try await process.quit() == 0)
        }
    }

    @Test func aMigrationKilledMidwayResumes() async throws {
        let directory = try TemporaryDirectory("versions-migrate-crash")
        defer { directory.remove() }
        try await seedVersion1(1000, in: directory)
        // Kills itself with SIGKILL in the middle of a journal write, batches of 10 records.
        let crashing = try await MirrorProcess(
            "crashing", schema: 2, directory: directory, ["--batch", "10", "--crash-at", "write:30:20"])
        crashing.process.write("migrate\n")
        #expect(try await crashing.process.wait(timeout: testTimeout) == .signaled(SIGKILL))

        let halfway = try await stored(in: directory)
        #expect(halfway.count == 1000)
        let migrated = halfway.values.filter { $0.version == 2 }
        #expect(!migrated.isEmpty && migrated.count < 1000, "\(migrated.count) migrated before the kill")
        #expect(migrated.count % 10 == 0, "whole batches only")
        #expect(migrated.allSatisfy { $0.task.priority == 0 && $0.task.schemaVersion == 2 })
        #expect(halfway.values.filter { $0.version == 1 }.allSatisfy {
            $0.task.priority == nil && $0.task.schemaVersion == nil
        })

        let resuming = try await MirrorProcess("resuming", schema: 2, directory: directory, ["--batch", "10"])
        try await resuming.send("migrate")
        #expect(resuming.migratedCount == 1000 - migrated.count)
        let done = try await stored(in: directory)
        #expect(done.count == 1000)
        #expect(done.values.allSatisfy { $0.version == 2 && $0.task.priority == 0 && $0.task.schemaVersion == 2 })
        #expect(Set(done.keys) == Set((0..<1000).map { "t\($0)" }))
        #expect(try await resuming.quit() == 0)
    }
}

extension MirrorProcess {
    /// Starts `mirror-worker versions` with the `Task` type of schema version `schema`.
    convenience init(
        _ name: String, schema: Int, directory: TemporaryDirectory, _ arguments: [String] = []
    ) async throws {
        try await self.init(name, command: "versions", directory: directory, ["--schema", "\(schema)"] + arguments)
    }

    /// The count of the last `migrated` line.
    var migratedCount: Int {
        lines.items.last { $0.hasPrefix("migrated ") }.flatMap { Int($0.dropFirst("migrated ".count)) } ?? -1
    }

    /// Waits until the records of the last `state` line, each a dictionary of its fields as
    /// strings, satisfy `condition`.
    func waitForState(_ what: String, until condition: @escaping @Sendable ([[String: String]]) -> Bool) async throws {
        try await lines.wait("\(name): \(what)") { lines in
            guard let line = lines.last(where: { $0.hasPrefix("state ") }),
                  let objects = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [[String: Any]]
            else { return false }
            return condition(objects.map { $0.mapValues { "\($0)" } })
        }
    }
}
