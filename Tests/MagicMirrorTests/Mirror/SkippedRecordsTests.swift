import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// Stored records that do not decode are impossible to miss (issue #36, point 1): listed
/// in `Mirror.skippedRecords`, logged (a line per batch), or, with `.fail`, a mirror that
/// does not open. The scenario of the issue: a field added without a migration.
@Suite(.timeLimit(.minutes(5))) struct SkippedRecordsTests {
    /// Version 1 of a note, as the app stored it.
    struct NoteV1: Recordable {
        static var recordType: String { "Note" }
        var id: String
        var text: String
    }

    /// Version 2: a field added without a migration.
    struct Note: Recordable {
        var id: String
        var text: String
        var pinned = false
    }

    /// Collects the log lines of a mirror.
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])
        var items: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    private func databaseWithNotes(_ count: Int = 3) async throws -> InMemoryDatabase {
        let database = InMemoryDatabase()
        let old = try await Mirror<NoteV1>(database: database)
        for index in 1...count { old.dataModel.append(NoteV1(id: "n\(index)", text: "note \(index)")) }
        try await old.flush()
        return database
    }

    @Test func aFieldAddedWithoutAMigrationListsEveryNoteAsSkipped() async throws {
        let database = try await databaseWithNotes()
        let lines = Lines()
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: lines.append)))
        #expect(notes.dataModel.isEmpty)
        #expect(notes.skippedRecords.map(\.recordID) == ["n1", "n2", "n3"])
        #expect(notes.skippedRecords.map(\.version) == [1, 1, 1])
        let first = try #require(notes.skippedRecords.first)
        #expect(first.error.kind == .decodingFailed)
        #expect(first.error.recordIDs == ["n1"])
        #expect(first.error.message.contains(#"field "pinned" is missing"#), "\(first.error.message)")
        #expect(first.error.message.contains(#".add("pinned", default: …)"#), "\(first.error.message)")
    }

    @Test func openingLogsOneLineForEveryRecordSkipped() async throws {
        let database = try await databaseWithNotes()
        let lines = Lines()
        _ = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: lines.append)))
        #expect(lines.items.count == 1, "\(lines.items)")
        let line = try #require(lines.items.first)
        #expect(line.hasPrefix("MagicMirror: 3 stored records of public/Note do not decode as Note and are skipped"), "\(line)")
        #expect(line.contains("Mirror.skippedRecords"), "\(line)")
        #expect(line.contains(#"field "pinned" is missing"#), "\(line)")
    }

    @Test func theMessageNamesOneSchemaVersionAndNoRecordVersion() async throws {
        let database = try await databaseWithNotes(1)
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: { _ in })))
        let message = try #require(notes.lastError).message
        #expect(message.hasPrefix("stored record n1 does not decode as Note: "), "\(message)")
        #expect(message.components(separatedBy: "version").count == 2, "one version in \(message)")
        #expect(message.contains("stored in Note's current schema version, 1"), "\(message)")
    }

    @Test func failOpeningThrowsNamingEveryRecord() async throws {
        let database = try await databaseWithNotes()
        let error = await #expect(throws: MirrorError.self) {
            _ = try await Mirror<Note>(
                database: database, configuration: MirrorConfiguration(undecodableRecords: .fail))
        }
        #expect(error?.kind == .decodingFailed)
        #expect(error?.recordIDs == ["n1", "n2", "n3"])
        #expect(error?.recordType == "Note")
        #expect(error?.message.contains("3 stored records of public/Note do not decode as Note") == true)
        #expect(error?.message.contains(#"field "pinned" is missing"#) == true)
        // Nothing was changed: the old version still reads every note.
        let old = try await Mirror<NoteV1>(database: database)
        #expect(old.dataModel.count == 3)
    }

    @Test func failOpensWhenEveryRecordDecodes() async throws {
        let database = InMemoryDatabase()
        try await database.simulateSave(Note(id: "n1", text: "fine"))
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .fail))
        #expect(notes.dataModel.map(\.id) == ["n1"])
        #expect(notes.skippedRecords.isEmpty)
    }

    @Test func aRecordLeavesTheListWhenItDecodesOrIsDeleted() async throws {
        let database = try await databaseWithNotes()
        let lines = Lines()
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: lines.append)))
        #expect(notes.skippedRecords.count == 3)

        // Another writer saves a version of n1 that decodes, and deletes n2.
        let fixed = try #require(try await database.fetch(["n1"], in: .public("Note")).first)
        try await database.commit(
            [.save("n1", fields: Data(#"{"id":"n1","pinned":true,"text":"note 1"}"#.utf8),
                   baseVersion: fixed.version, timestamp: HybridLogicalClock.shared.now())],
            to: .public("Note"))
        try await database.simulateDelete(id: "n2", in: .public("Note"))
        try await database.simulateSave(Note(id: "marker", text: "after both"))
        _ = try await notes.waitUntil("the fixed note and the marker") { $0.count == 2 }
        #expect(notes.dataModel.map(\.id) == ["n1", "marker"])
        #expect(notes.skippedRecords.map(\.recordID) == ["n3"])

        // This mirror discards n3 on purpose, then adds a record with its id.
        try await notes.discardSkippedRecord(recordID: "n3")
        #expect(notes.skippedRecords.isEmpty)
        notes.dataModel.append(Note(id: "n3", text: "rewritten"))
        try await notes.flush()
        #expect(notes.dataModel.map(\.id) == ["n1", "marker", "n3"])
        #expect(lines.items.count == 1, "nothing new was skipped: \(lines.items)")
    }

    @Test func aRecordThatStopsDecodingLaterIsListedAndLogged() async throws {
        let database = InMemoryDatabase()
        let lines = Lines()
        let notes = try await Mirror<Note>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .fail(log: lines.append)))
        #expect(lines.items.isEmpty)
        try await database.simulateSave(id: "bad", fields: Data(#"{"id":"bad","text":7,"pinned":false}"#.utf8),
                                        in: .public("Note"))
        try await database.simulateSave(Note(id: "marker", text: "after it"))
        _ = try await notes.waitUntil("the marker") { $0.count == 1 }
        #expect(notes.skippedRecords.map(\.recordID) == ["bad"])
        #expect(lines.items.count == 1)
        #expect(lines.items.first?.hasPrefix("MagicMirror: 1 stored record of public/Note does not decode") == true)
    }
}
