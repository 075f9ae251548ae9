import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Migrations written against stored JSON fields: each kind, several steps in a row,
/// records from newer versions, records that still do not decode, and writing migrated
/// records back.
@Suite(.timeLimit(.minutes(5))) struct RecordMigrationTests {
    static let zone = ZoneID.public("Person")

    /// Stores raw fields as another version of the app would.
    private func store(_ json: String, id: String = "p1", in database: InMemoryDatabase) async throws {
        try await database.simulateSave(id: id, fields: Data(json.utf8), in: Self.zone)
    }

    /// The stored fields of one record, as a JSON object.
    private func storedObject(_ id: String = "p1", in database: InMemoryDatabase) async throws -> [String: Any] {
        let record = try #require(try await database.fetch([id], in: Self.zone).first)
        let fields = try #require(record.fields)
        return try #require(try JSONSerialization.jsonObject(with: fields) as? [String: Any])
    }

    // MARK: Each kind of migration

    struct WithPriority: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [.add("priority", default: 0)]
        var id: String
        var name: String
        var priority = 0
    }

    struct WithPriorityNoMigration: Recordable {
        static var recordType: String { "Person" }
        var id: String
        var name: String
        var priority = 0
    }

    @Test func addingAFieldWithADefaultTakesOneMigration() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","name":"Ada"}"#, in: database)
        let mirror = try await Mirror<WithPriority>(database: database)
        #expect(mirror.dataModel.array == [WithPriority(id: "p1", name: "Ada", priority: 0)])
        #expect(mirror.lastError == nil)
        // Loading alone writes nothing back.
        #expect(try await database.fetch(["p1"], in: Self.zone).first?.version == 1)
    }

    @Test func withoutTheMigrationTheErrorNamesTheFieldAndTheVersions() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","name":"Ada"}"#, in: database)
        let mirror = try await Mirror<WithPriorityNoMigration>(database: database)
        #expect(mirror.dataModel.isEmpty)
        let error = try #require(mirror.lastError)
        #expect(error.kind == .decodingFailed)
        #expect(error.recordIDs == ["p1"])
        #expect(error.message.contains(#"field "priority" is missing"#), "\(error.message)")
        #expect(error.message.contains("current schema version, 1"), "\(error.message)")
        #expect(error.underlying is DecodingError)
        // Kept untouched.
        #expect(try await storedObject(in: database).keys.sorted() == ["id", "name"])
    }

    struct Renamed: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [.rename("title", to: "name")]
        var id: String
        var name: String
    }

    @Test func renamingAField() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","title":"Ada"}"#, in: database)
        let mirror = try await Mirror<Renamed>(database: database)
        #expect(mirror.dataModel.array == [Renamed(id: "p1", name: "Ada")])
        mirror.dataModel[0].name = "Ada L."
        try await mirror.flush()
        // Saved in the new form: the old name is gone, not kept as an unknown field.
        let stored = try await storedObject(in: database)
        #expect(stored.keys.sorted() == ["$schemaVersion", "id", "name"])
        #expect(stored["name"] as? String == "Ada L.")
    }

    struct Retyped: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [.convert("age", from: String.self) { Int($0) ?? 0 }]
        var id: String
        var age: Int
    }

    @Test func changingAFieldsType() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","age":"36"}"#, in: database)
        try await store(#"{"id":"p2","age":"unknown"}"#, id: "p2", in: database)
        let mirror = try await Mirror<Retyped>(database: database)
        #expect(Set(mirror.dataModel.array.map(\.age)) == [36, 0])
    }

    // Splitting a field: the article's `Contact` (ChangingYourRecordTypesArticleTests).

    struct Joined: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [
            .transform { fields in
                let first = try fields.value("first", as: String.self) ?? ""
                let last = try fields.value("last", as: String.self) ?? ""
                try fields.set("name", to: "\(first) \(last)")
                fields.remove("first")
                fields.remove("last")
            },
        ]
        var id: String
        var name: String
    }

    @Test func joiningFields() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"first":"Ada","id":"p1","last":"Lovelace"}"#, in: database)
        let mirror = try await Mirror<Joined>(database: database)
        #expect(mirror.dataModel.array == [Joined(id: "p1", name: "Ada Lovelace")])
    }

    struct Dropped: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [.drop("legacy")]
        var id: String
        var name: String
    }

    struct NotDropped: Recordable {
        static var recordType: String { "Person" }
        var id: String
        var name: String
    }

    @Test func droppingAFieldRemovesIt() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","legacy":true,"name":"Ada"}"#, in: database)
        let mirror = try await Mirror<Dropped>(database: database)
        mirror.dataModel[0].name = "Ada L."
        try await mirror.flush()
        #expect(try await storedObject(in: database).keys.sorted() == ["$schemaVersion", "id", "name"])
    }

    @Test func aFieldNotDroppedIsKept() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","legacy":true,"name":"Ada"}"#, in: database)
        let mirror = try await Mirror<NotDropped>(database: database)
        mirror.dataModel[0].name = "Ada L."
        try await mirror.flush()
        let stored = try await storedObject(in: database)
        #expect(stored.keys.sorted() == ["id", "legacy", "name"])
        #expect(stored["legacy"] as? Bool == true)
    }

    // MARK: Several steps, newer records

    /// Version 3: `title` became `name` in version 2, `priority` came in version 3.
    struct ThreeSteps: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [
            .rename("title", to: "name"),
            .add("priority", default: 1),
        ]
        var id: String
        var name: String
        var priority: Int
    }

    @Test func eachRecordRunsTheStepsAfterItsVersion() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","title":"from version 1"}"#, in: database)
        try await store(#"{"$schemaVersion":2,"id":"p2","name":"from version 2"}"#, id: "p2", in: database)
        // A version 2 record that kept a field called "title": not renamed again.
        try await store(#"{"$schemaVersion":2,"id":"p3","name":"n","title":"t"}"#, id: "p3", in: database)
        try await store(#"{"$schemaVersion":3,"id":"p4","name":"from version 3","priority":5}"#, id: "p4", in: database)
        let mirror = try await Mirror<ThreeSteps>(database: database)
        let byID = Dictionary(uniqueKeysWithValues: mirror.dataModel.map { ($0.id, $0) })
        #expect(byID["p1"] == ThreeSteps(id: "p1", name: "from version 1", priority: 1))
        #expect(byID["p2"] == ThreeSteps(id: "p2", name: "from version 2", priority: 1))
        #expect(byID["p3"] == ThreeSteps(id: "p3", name: "n", priority: 1))
        #expect(byID["p4"] == ThreeSteps(id: "p4", name: "from version 3", priority: 5))
    }

    @Test func aRecordFromANewerVersionIsNeverSavedWithLess() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"$schemaVersion":7,"colour":"red","id":"p1","name":"Ada","priority":4}"#, in: database)
        let mirror = try await Mirror<WithPriority>(database: database)
        #expect(mirror.dataModel.array == [WithPriority(id: "p1", name: "Ada", priority: 4)])
        mirror.dataModel[0].name = "Ada L."
        try await mirror.flush()
        let stored = try await storedObject(in: database)
        #expect(stored["$schemaVersion"] as? Int == 7, "not stamped down to the mirror's version 2")
        #expect(stored["colour"] as? String == "red")
        #expect(stored["name"] as? String == "Ada L.")
        #expect(try await mirror.migrateStoredRecords() == 0, "a newer record is not migrated")
    }

    // MARK: Records that still do not decode

    struct StrictAge: Recordable {
        static var recordType: String { "Person" }
        static let migrations: [RecordMigration] = [
            .convert("age", from: String.self) { text in
                guard let age = Int(text) else { throw MirrorError(.invalidRecord, "not a number: \(text)") }
                return age
            },
        ]
        var id: String
        var age: Int
    }

    @Test func aMigrationThatThrowsIsReportedOnceAndTheRecordKeptUntouched() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"age":"many","id":"p1"}"#, in: database)
        try await store(#"{"age":"40","id":"p2"}"#, id: "p2", in: database)
        let mirror = try await Mirror<StrictAge>(database: database)
        let errors = AsyncCollector(mirror.errors())
        #expect(mirror.dataModel.array == [StrictAge(id: "p2", age: 40)])
        let error = try #require(mirror.lastError)
        #expect(error.kind == .decodingFailed)
        #expect(error.recordIDs == ["p1"])
        #expect(error.message.contains("migration 1"), "\(error.message)")
        #expect(error.message.contains("schema version 1"), "\(error.message)")
        #expect(error.message.contains("not a number: many"), "\(error.message)")

        // Another change to the zone: the bad record is not reported again.
        try await store(#"{"age":"41","id":"p3"}"#, id: "p3", in: database)
        try await waitUntil(mirror, "the new record") { $0.count == 2 }
        #expect(errors.items.isEmpty)
        #expect(try await mirror.migrateStoredRecords() == 2, "the bad record is skipped")
        #expect(try await storedObject(in: database)["age"] as? String == "many")
        #expect(try await database.fetch(["p1"], in: Self.zone).first?.version == 1)
    }

    @Test func aMigratedRecordThatDoesNotDecodeNamesTheFieldAndBothVersions() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","title":42}"#, in: database)
        let mirror = try await Mirror<ThreeSteps>(database: database)
        let error = try #require(mirror.lastError)
        #expect(error.message.contains(#"field "name""#), "\(error.message)")
        #expect(error.message.contains("stored in schema version 1; ThreeSteps is at 3"), "\(error.message)")
    }

    // MARK: Writing migrated records back

    @Test func migrateStoredRecordsRewritesOlderRecordsOnce() async throws {
        let database = InMemoryDatabase()
        for index in 0..<40 {
            try await store(#"{"id":"p\#(index)","title":"t\#(index)"}"#, id: "p\(index)", in: database)
        }
        let mirror = try await Mirror<ThreeSteps>(database: database, configuration: MirrorConfiguration(maximumBatchSize: 7))
        let changes = AsyncCollector(mirror.changes())
        #expect(try await mirror.migrateStoredRecords() == 40)
        #expect(try await mirror.migrateStoredRecords() == 0)
        let set = try await database.fetchAll(in: Self.zone)
        #expect(set.records.allSatisfy { $0.version == 2 })
        let first = try #require(set.records.first { $0.id == "p0" }?.fields)
        #expect(String(decoding: first, as: UTF8.self) == #"{"$schemaVersion":3,"id":"p0","name":"t0","priority":1}"#)
        // The mirror's records did not change: the rewrite stores what it already showed.
        try await mirror.flush()
        #expect(mirror.dataModel.count == 40)
        #expect(changes.items.isEmpty, "\(changes.items)")
    }

    @Test func anEditMadeWhileMigratingWins() async throws {
        let database = InMemoryDatabase()
        try await store(#"{"id":"p1","title":"old"}"#, in: database)
        for policy: ConflictPolicy<ThreeSteps> in [.changedKeys, .lastWriterWins] {
            let mirror = try await Mirror<ThreeSteps>(database: database.writer(named: "editor"), conflictPolicy: policy)
            let migrator = try await Mirror<ThreeSteps>(database: database.writer(named: "migrator"))
            let name = "edited \(UUID())"
            mirror.dataModel[0].name = name
            _ = try await migrator.migrateStoredRecords()
            try await mirror.flush()
            try await waitUntil(migrator, "the edit") { $0.first?.name == name }
            #expect(try await storedObject(in: database)["name"] as? String == name)
        }
    }
}
