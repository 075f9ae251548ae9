import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Two versions of one record type share a zone: an older one that does not know a field
/// and a newer one that does. Whatever the older one saves, and however a conflict is
/// settled, the field the older one does not know stays stored.
@Suite(.timeLimit(.minutes(5))) struct UnknownFieldsTests {
    /// The first version of the type.
    struct TaskV1: Recordable {
        static var recordType: String { "Task" }
        var id: String
        var title: String
        var note: String?
    }

    /// The next version: one more field, with a default.
    struct TaskV2: Recordable {
        static var recordType: String { "Task" }
        static let migrations: [RecordMigration] = [.add("priority", default: 0)]
        var id: String
        var title: String
        var note: String?
        var priority = 0
    }

    /// The stored fields of one record, as a JSON object.
    private func storedObject(_ id: String, in database: any RecordDatabase) async throws -> [String: Any] {
        let set = try await database.fetchAll(in: .public("Task"))
        let record = try #require(set.records.first { $0.id == id })
        let fields = try #require(record.fields)
        return try #require(try JSONSerialization.jsonObject(with: fields) as? [String: Any])
    }

    @Test(arguments: DatabaseFactory.all)
    func anOlderVersionsEditKeepsTheFieldsItDoesNotKnow(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let newer = try await Mirror<TaskV2>(database: opened.database)
        newer.dataModel.append(TaskV2(id: "t1", title: "write", note: "soon", priority: 5))
        try await newer.flush()

        let older = try await Mirror<TaskV1>(database: try await opened.otherWriter())
        try await waitUntil(older, "the newer version's record") { $0.count == 1 }
        older.dataModel[0].title = "write the report"
        try await older.flush()

        let stored = try await storedObject("t1", in: opened.database)
        #expect(stored["priority"] as? Int == 5)
        #expect(stored["title"] as? String == "write the report")
        #expect(stored["$schemaVersion"] as? Int == 2)
        try await waitUntil(newer, "the older version's edit") {
            $0 == [TaskV2(id: "t1", title: "write the report", note: "soon", priority: 5)]
        }
    }

    @Test(arguments: DatabaseFactory.all)
    func aFieldTheTypeKnowsAndClearsIsRemoved(_ factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let older = try await Mirror<TaskV1>(database: opened.database)
        older.dataModel.append(TaskV1(id: "t1", title: "write", note: "soon"))
        try await older.flush()
        older.dataModel[0].note = nil
        try await older.flush()
        let stored = try await storedObject("t1", in: opened.database)
        #expect(stored["note"] == nil)
        #expect(stored["$schemaVersion"] == nil, "a type without migrations stores no schema version")
    }

    struct Race: Sendable, CustomTestStringConvertible {
        let factory: DatabaseFactory
        let policy: String
        let olderCommitsFirst: Bool
        var testDescription: String { "\(factory.name), \(policy), older commits \(olderCommitsFirst ? "first" : "last")" }
    }

    static let races = DatabaseFactory.all.flatMap { factory in
        ["changedKeys", "lastWriterWins", "serverWins", "custom"].flatMap { policy in
            [true, false].map { Race(factory: factory, policy: policy, olderCommitsFirst: $0) }
        }
    }

    private static func policy<Record: Recordable>(_ name: String) -> ConflictPolicy<Record> {
        switch name {
        case "lastWriterWins": .lastWriterWins
        case "serverWins": .serverWins
        case "custom": .custom { _, local, _ in local }
        default: .changedKeys
        }
    }

    /// The newer version changes `priority` while the older one changes `title`, both from
    /// the same stored record; the second commit conflicts. Whatever the policy, `priority`
    /// keeps a value one of the versions gave it, and the newer version still shows it.
    @Test(arguments: races)
    func noConflictPolicyDropsAFieldTheOlderVersionDoesNotKnow(_ race: Race) async throws {
        let opened = try await race.factory.make()
        defer { opened.cleanup() }
        let newerDB = ScriptedDatabase(opened.database)
        let olderDB = ScriptedDatabase(try await opened.otherWriter())
        let newer = try await Mirror<TaskV2>(database: newerDB, conflictPolicy: Self.policy(race.policy))
        newer.dataModel.append(TaskV2(id: "t1", title: "write", priority: 1))
        try await newer.flush()
        let older = try await Mirror<TaskV1>(database: olderDB, conflictPolicy: Self.policy(race.policy))
        try await waitUntil(older, "the record") { $0.count == 1 }

        newerDB.hold()
        olderDB.hold()
        newer.dataModel[0].priority = 2
        older.dataModel[0].title = "write the report"
        let (first, second) = race.olderCommitsFirst ? (olderDB, newerDB) : (newerDB, olderDB)
        first.release()
        try await (race.olderCommitsFirst ? older.flush() : newer.flush())
        second.release()
        try await (race.olderCommitsFirst ? newer.flush() : older.flush())

        let stored = try await storedObject("t1", in: opened.database)
        let priority = try #require(stored["priority"] as? Int, "priority was dropped: \(stored)")
        #expect([1, 2].contains(priority))
        if race.policy == "changedKeys" {
            #expect(priority == 2)
            #expect(stored["title"] as? String == "write the report")
        }
        if race.policy == "custom" || (race.policy == "lastWriterWins" && !race.olderCommitsFirst) {
            // The older version's record won as a whole, but it never wrote less than the
            // newer version had stored: the newer version's priority is there.
            #expect(priority == 2)
        }
        try await waitUntil(newer, "the settled record") { records in
            records.count == 1 && records[0].priority == priority
        }
    }
}
