import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the article "Changing your record types" (Sources/MagicMirror/
// Documentation.docc/ChangingYourRecordTypes.md) and the "Add a field later" block of
// "Getting Started", compiled and run. The blocks appear here exactly as in the articles,
// which is why they are not indented; Tests/MirrorTestingTests/
// ChangingYourRecordTypesArticleTests.swift checks that every block is here.

enum ChangingTypesVersion1 {
struct Todo: Recordable {
    var id: String
    var title: String
}
}

enum ChangingTypesVersion2 {
struct Todo: Recordable {
    var id: String
    var title: String
    var priority = 0

    static let migrations: [RecordMigration] = [
        .add("priority", default: 0),       // version 1 → 2
    ]
}
}

enum ChangingTypesVersion5 {
struct Todo: Recordable {
    var id: String
    var name: String
    var priority = 0
    var minutes: Int?

    static let migrations: [RecordMigration] = [
        .add("priority", default: 0),                         // version 1 → 2
        .rename("title", to: "name"),                         // 2 → 3
        .convert("minutes", from: String.self) { Int($0) },   // 3 → 4: "15" becomes 15
        .drop("notes"),                                       // 4 → 5
    ]
}
}

enum ChangingTypesContacts {
struct Contact: Recordable {
    var id: String
    var firstName: String
    var lastName: String

    static let migrations: [RecordMigration] = [
        .transform { fields in
            let name = try fields.value("name", as: String.self) ?? ""
            let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
            try fields.set("firstName", to: parts.first ?? "")
            try fields.set("lastName", to: parts.count > 1 ? parts[1] : "")
            fields.remove("name")
        },
    ]
}
}

enum GettingStartedAddAField {
struct Todo: Recordable {
    var id = UUID()
    var title: String
    var done = false
    var priority = 0

    static let migrations: [RecordMigration] = [.add("priority", default: 0)]
}
}

enum ChangingTypesSkippedSettings {
/// Version 1 of a note, which cannot read what version 2 stored under the id "settings".
struct Note: Recordable {
    var id: String
    var text: String
}
}

@Suite(.timeLimit(.minutes(5))) struct ChangingYourRecordTypesArticleTests {
    @Test func theWorkedExampleRuns() async throws {
        typealias Todo = ChangingTypesVersion5.Todo

let database = InMemoryDatabase()
let oldRecord = #"{"id":"t1","minutes":"15","notes":"from 2024","title":"Buy milk"}"#
try await database.simulateSave(id: "t1", fields: Data(oldRecord.utf8), in: .public("Todo"))

let todos = try await Mirror<Todo>(database: database)
#expect(todos.dataModel.array == [Todo(id: "t1", name: "Buy milk", priority: 0, minutes: 15)])

        // Records of versions 2 and 4 load too.
        try await database.simulateSave(
            id: "t2", fields: Data(#"{"$schemaVersion":2,"id":"t2","priority":3,"title":"Call mum"}"#.utf8),
            in: .public("Todo"))
        try await database.simulateSave(
            id: "t3", fields: Data(#"{"$schemaVersion":4,"id":"t3","minutes":null,"name":"Post","priority":1}"#.utf8),
            in: .public("Todo"))
        try await todos.waitUntil(timeout: .seconds(120), "versions 2 and 4") { $0.count == 3 }
        #expect(todos.dataModel.array[1...] == [
            Todo(id: "t2", name: "Call mum", priority: 3, minutes: nil),
            Todo(id: "t3", name: "Post", priority: 1, minutes: nil),
        ])

let rewritten = try await todos.migrateStoredRecords()
print("migrated \(rewritten) records")

        #expect(rewritten == 3)
        let stored = try await database.fetchAll(in: .public("Todo")).records
        #expect(stored.allSatisfy { String(decoding: $0.fields ?? Data(), as: UTF8.self).hasPrefix(#"{"$schemaVersion":5,"#) })
        #expect(!String(decoding: stored[0].fields ?? Data(), as: UTF8.self).contains("notes"), "dropped")

        let errors = AsyncCollector(todos.errors())
        try await database.simulateSave(
            id: "t4", fields: Data(#"{"$schemaVersion":5,"id":"t4","name":7,"priority":0}"#.utf8), in: .public("Todo"))
        try await errors.wait(forCount: 1, "the record that does not decode")

let problems = todos.skippedRecords.map { "\($0.recordID): \($0.error.message)" }

        #expect(problems.count == 1 && problems[0].hasPrefix("t4: stored record t4 does not decode"), "\(problems)")
        let error = try #require(todos.lastError)
        #expect(error.recordIDs == ["t4"])
        #expect(error.message.contains(#"field "name" is not a String"#), "\(error.message)")
        #expect(error.message.contains("stored in Todo's current schema version, 5"), "\(error.message)")
    }

    @Test func anOlderAndANewerVersionShareTheDatabase() async throws {
        let database = InMemoryDatabase()
        let older = try await Mirror<ChangingTypesVersion1.Todo>(database: database.writer(named: "version 1"))
        older.dataModel.append(ChangingTypesVersion1.Todo(id: "t1", title: "Buy milk"))
        try await older.flush()
        let newer = try await Mirror<ChangingTypesVersion2.Todo>(database: database.writer(named: "version 2"))
        #expect(newer.dataModel.array == [ChangingTypesVersion2.Todo(id: "t1", title: "Buy milk", priority: 0)])
        newer.dataModel[0].priority = 2
        try await newer.flush()
        older.dataModel[0].title = "Buy oat milk"
        try await older.flush()
        try await newer.waitUntil(timeout: .seconds(120), "the older version's edit") {
            $0.array == [ChangingTypesVersion2.Todo(id: "t1", title: "Buy oat milk", priority: 2)]
        }
    }

    @Test func aSkippedRecordIsReplacedOnlyOnPurpose() async throws {
        typealias Note = ChangingTypesSkippedSettings.Note
        let database = InMemoryDatabase()
        // Version 2 stored its settings with a text that version 1 cannot read.
        try await database.simulateSave(
            id: "settings", fields: Data(#"{"id":"settings","text":{"font":"serif"}}"#.utf8), in: .public("Note"))
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: { _ in })))
        // Without the discard, the edit is refused and the stored record kept.
        notes.dataModel.append(Note(id: "settings", text: "defaults"))
        #expect(notes.dataModel.isEmpty)
        #expect(notes.lastError?.kind == .refused)
        await #expect(throws: MirrorError.self) { try await notes.flush() }
        #expect(database.storedRecord("settings", in: .public("Note"))?.version == 1)

if notes.skippedRecords.contains(where: { $0.recordID == "settings" }) {
    try await notes.discardSkippedRecord(recordID: "settings")
}
notes.dataModel.append(Note(id: "settings", text: "defaults"))
try await notes.flush()

        #expect(try database.records(Note.self) == [Note(id: "settings", text: "defaults")])
        #expect(notes.skippedRecords.isEmpty)
    }

    @Test func splittingAFieldRuns() async throws {
        let database = InMemoryDatabase()
        try await database.simulateSave(
            id: "c1", fields: Data(#"{"id":"c1","name":"Ada King Lovelace"}"#.utf8), in: .public("Contact"))
        let contacts = try await Mirror<ChangingTypesContacts.Contact>(database: database)
        #expect(contacts.dataModel.array == [
            ChangingTypesContacts.Contact(id: "c1", firstName: "Ada", lastName: "King Lovelace"),
        ])
    }

    @Test func gettingStartedsNewFieldLoadsOlderRecords() async throws {
        typealias Todo = GettingStartedAddAField.Todo
        let database = InMemoryDatabase()
        let id = UUID()
        try await database.simulateSave(
            id: id.uuidString, fields: Data(#"{"done":true,"id":"\#(id.uuidString)","title":"Buy milk"}"#.utf8),
            in: .public("Todo"))
        let todos = try await Mirror<Todo>(database: database)
        #expect(todos.dataModel.array == [Todo(id: id, title: "Buy milk", done: true, priority: 0)])
    }
}
