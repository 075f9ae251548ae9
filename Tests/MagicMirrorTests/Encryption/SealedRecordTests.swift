import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// Private mirrors with a cipher (`MirrorConfiguration.cipher`), in one process, on every
/// database: what is stored, who may have a cipher, a wrong key, conflicts, migrations and
/// unknown fields on sealed records. SealedRecordProcessTests runs them in real processes.
@Suite(.timeLimit(.minutes(5))) struct SealedRecordTests {
    struct Note: Recordable, Hashable {
        var id: String
        var title: String
        var body = ""
    }

    /// `Note` of a later version of an app: one more field, added by a migration.
    struct NoteV2: Recordable, Hashable {
        static var recordType: String { "Note" }
        static let migrations: [RecordMigration] = [.add("priority", default: 0)]
        var id: String
        var title: String
        var body = ""
        var priority = 0
    }

    static let zone = ZoneID.private("Note", user: "ann")
    static let cipher = InsecureTestCipher(keyID: "k1", secret: "ann's secret")

    static func open<Record: Recordable>(
        _ type: Record.Type = Note.self, _ database: any RecordDatabase, cipher: (any RecordCipher)? = cipher
    ) async throws -> Mirror<Record> {
        try await Mirror<Record>(
            database: database, scope: .private, user: try MirrorUser(name: "ann"),
            configuration: MirrorConfiguration(retryDelay: .milliseconds(5), cipher: cipher))
    }

    /// The stored fields of a record, as they are.
    static func stored(_ id: String, in database: any RecordDatabase) async throws -> StoredRecord {
        try #require(try await database.fetch([id], in: zone).first)
    }

    /// The members of a JSON object.
    static func members(_ fields: Data?) throws -> [String: Any] {
        let data = try #require(fields)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func contains(_ data: Data?, _ text: String) -> Bool {
        data.map { $0.range(of: Data(text.utf8)) != nil } ?? false
    }

    @Test(arguments: DatabaseFactory.all)
    func storedFieldsAreSealedAndOpenAgain(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Self.open(Note.self, opened.database)
        mirror.dataModel.append(Note(id: "n1", title: "Zanzibar title", body: "pineapple body"))
        try await mirror.flush()

        let stored = try await Self.stored("n1", in: opened.database)
        let members = try Self.members(stored.fields)
        #expect(Set(members.keys) == ["$key", "$sealed"])
        #expect(members["$key"] as? String == "k1")
        #expect(!Self.contains(stored.fields, "Zanzibar") && !Self.contains(stored.fields, "pineapple"))
        #expect(!Self.contains(stored.fields, "title") && !Self.contains(stored.fields, "\"id\""))

        let other = try await Self.open(Note.self, try await opened.otherWriter())
        #expect(other.dataModel.array == [Note(id: "n1", title: "Zanzibar title", body: "pineapple body")])
    }

    @Test func aCipherIsRefusedForPublicRecordsAndForAMirrorThatFollowsAUserSession() async throws {
        let database = InMemoryDatabase()
        let configuration = MirrorConfiguration(cipher: Self.cipher)
        let publicError = await #expect(throws: MirrorError.self) {
            _ = try await Mirror<Note>(database: database, configuration: configuration)
        }
        #expect(publicError?.kind == .unsupported)
        #expect(publicError?.message.contains("private records only") == true)
        let followingError = await #expect(throws: MirrorError.self) {
            _ = try await Mirror<Note>(database: database, scope: .private, configuration: configuration)
        }
        #expect(followingError?.kind == .unsupported)
        #expect(followingError?.message.contains("name that user") == true)
        #expect(database.commitLog.isEmpty)
    }

    @Test(arguments: DatabaseFactory.all)
    func aWrongKeyIsReportedAndOverwritesNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        // Error notifications are seen by every test: this one's name its own record.
        let id = "wrong-key-\(UUID().uuidString)"
        let writer = try await Self.open(Note.self, opened.database)
        writer.dataModel.append(Note(id: id, title: "kept"))
        try await writer.flush()
        let before = try await Self.stored(id, in: opened.database)

        // The same key id, another secret; then no cipher at all.
        let reported = ErrorNotificationCollector(naming: [id])
        let wrong = try await Self.open(
            Note.self, try await opened.otherWriter(), cipher: InsecureTestCipher(keyID: "k1", secret: "guess"))
        #expect(wrong.dataModel.isEmpty)
        try await reported.errors.wait(forCount: 1, "the record that does not open")
        let error = try #require(reported.errors.items.first)
        #expect(error.kind == .decodingFailed)
        #expect(error.message.contains("sealed with key \"k1\""), "\(error)")
        #expect(error.message.contains("left untouched"), "\(error)")

        // A record of the same id made with the wrong key is refused and overwrites nothing
        // (the mirror skips the stored one, which it cannot open).
        wrong.dataModel.append(Note(id: id, title: "overwritten?"))
        #expect(wrong.dataModel.isEmpty)
        let refused = await #expect(throws: MirrorError.self) { try await wrong.flush() }
        #expect(refused?.kind == .refused)
        #expect(refused?.message.contains("discardSkippedRecord(recordID:)") == true, "\(String(describing: refused))")
        #expect(wrong.pendingChanges.isEmpty)
        #expect(try await Self.stored(id, in: opened.database) == before)

        // (The same stored entry's failure is posted once per process: this one is on the
        // mirror alone.)
        let open = try await Mirror<Note>(database: try await opened.otherWriter(), scope: .private, user: try MirrorUser(name: "ann"))
        #expect(open.dataModel.isEmpty)
        #expect(open.lastError?.kind == .decodingFailed)
        #expect(open.lastError?.message.contains("the mirror has no cipher") == true, "\(String(describing: open.lastError))")

        let reopened = try await Self.open(Note.self, try await opened.otherWriter())
        #expect(reopened.dataModel.array == [Note(id: id, title: "kept")])
    }

    /// Two mirrors on two writers of `opened` that both show `note` (stored by the first),
    /// with their commits held until released.
    static func twoWritersHolding(
        _ note: Note, _ opened: DatabaseFactory.Opened, secondCipher: any RecordCipher = cipher
    ) async throws -> (Mirror<Note>, ScriptedDatabase, Mirror<Note>, ScriptedDatabase) {
        let firstDB = ScriptedDatabase(opened.database)
        let secondDB = ScriptedDatabase(try await opened.otherWriter())
        let first = try await open(Note.self, firstDB)
        first.dataModel.append(note)
        try await first.flush()
        let second = try await open(Note.self, secondDB, cipher: secondCipher)
        #expect(second.dataModel.array == [note])
        firstDB.hold()
        secondDB.hold()
        return (first, firstDB, second, secondDB)
    }

    @Test(arguments: DatabaseFactory.all)
    func editsOfDifferentFieldsAreMergedOnOpenFields(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let (alice, aliceDB, bob, bobDB) = try await Self.twoWritersHolding(
            Note(id: "n1", title: "original title", body: "original body"), opened)
        alice.dataModel[recordID: "n1"]?.title = "alice's title"
        bob.dataModel[recordID: "n1"]?.body = "bob's body"
        aliceDB.release()
        try await alice.flush()
        bobDB.release()
        try await bob.flush()
        #expect(bobDB.attempts.items.contains { !$0.applied && $0.error == nil }, "bob's commit conflicted")

        let merged = Note(id: "n1", title: "alice's title", body: "bob's body")
        for mirror in [alice, bob] {
            try await waitUntil(mirror, "the merged record") { $0 == [merged] }
        }
        let stored = try await Self.stored("n1", in: opened.database)
        #expect(Set(try Self.members(stored.fields).keys) == ["$key", "$sealed"])
        let open = try SchemaCoder<Note>(cipher: Self.cipher).opened(try #require(stored.fields))
        #expect(try JSONDecoder().decode(Note.self, from: open) == merged)
    }

    @Test(arguments: DatabaseFactory.all)
    func aConflictWithARecordSealedWithAKeyTheMirrorLacksWaitsAndOverwritesNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let rotated = InsecureTestCipher(keyID: "k2", secret: "new secret", olderKeys: ["k1": "ann's secret"])
        let (old, oldDB, new, newDB) = try await Self.twoWritersHolding(
            Note(id: "n1", title: "original"), opened, secondCipher: rotated)

        // The rotated mirror's edit is stored first (sealed with k2); the old mirror's edit,
        // made meanwhile, conflicts with a record it cannot open.
        old.dataModel[recordID: "n1"]?.title = "old process's title"
        new.dataModel[recordID: "n1"]?.body = "new process's body"
        newDB.release()
        try await new.flush()
        let stored = try await Self.stored("n1", in: opened.database)
        oldDB.release()
        let error = await #expect(throws: MirrorError.self) { try await old.flush() }
        #expect(error?.kind == .decodingFailed)
        #expect(error?.message.contains("cannot be opened") == true, "\(String(describing: error))")
        #expect(old.pendingChanges.map(\.recordID) == ["n1"])
        #expect(try await Self.stored("n1", in: opened.database) == stored)
        #expect(new.dataModel.array == [Note(id: "n1", title: "original", body: "new process's body")])
    }

    @Test func migrationsAndUnknownFieldsWorkOnOpenFields() async throws {
        let database = InMemoryDatabase()
        let older = try await Self.open(Note.self, database)
        older.dataModel.append(Note(id: "n1", title: "first"))
        try await older.flush()

        // The newer version migrates the sealed record in memory, and saves it sealed.
        let newer = try await Self.open(NoteV2.self, database.writer(named: "newer"))
        #expect(newer.dataModel.array == [NoteV2(id: "n1", title: "first", priority: 0)])
        newer.dataModel[recordID: "n1"]?.priority = 5
        try await newer.flush()
        let saved = try Self.members(try await Self.stored("n1", in: database).fields)
        #expect(saved["$schemaVersion"] as? Int == 2, "a copy of the sealed schema version, in the clear")

        // The older version edits it (merging with the save, if it has not read it yet) and
        // keeps the field it does not know.
        older.dataModel[recordID: "n1"]?.title = "second"
        try await older.flush()
        let stored = try await Self.stored("n1", in: database)
        let open = try SchemaCoder<Note>(cipher: Self.cipher).opened(try #require(stored.fields))
        let fields = try Self.members(open)
        #expect(fields["title"] as? String == "second")
        #expect(fields["priority"] as? Int == 5)
        #expect(fields["$schemaVersion"] as? Int == 2)
        try await waitUntil(newer, "the older version's edit") { $0 == [NoteV2(id: "n1", title: "second", priority: 5)] }
    }

    @Test func openRecordsAreReadAndMigrateStoredRecordsSealsThem() async throws {
        let database = InMemoryDatabase()
        let plain = try await Mirror<Note>(database: database, scope: .private, user: try MirrorUser(name: "ann"))
        plain.dataModel.append(Note(id: "n1", title: "written before the cipher"))
        try await plain.flush()

        let sealed = try await Self.open(Note.self, database)
        #expect(sealed.dataModel.array == [Note(id: "n1", title: "written before the cipher")])
        #expect(try await sealed.migrateStoredRecords() == 1)
        let stored = try await Self.stored("n1", in: database)
        #expect(!Self.contains(stored.fields, "written before"))
        #expect(try await sealed.migrateStoredRecords() == 0, "every record is sealed with the current key")

        // After a rotation, migrateStoredRecords seals every record with the new key.
        let rotated = try await Self.open(
            Note.self, database.writer(named: "rotated"),
            cipher: InsecureTestCipher(keyID: "k2", secret: "new secret", olderKeys: ["k1": "ann's secret"]))
        #expect(rotated.dataModel.count == 1)
        #expect(try await rotated.migrateStoredRecords() == 1)
        #expect(try Self.members(try await Self.stored("n1", in: database).fields)["$key"] as? String == "k2")
    }

    @Test func aMalformedSealedRecordIsAProblemAndOpenFieldsPassThrough() throws {
        let coder = SchemaCoder<Note>(cipher: Self.cipher)
        let malformed = Data(#"{"$key":"k1","$sealed":"not Base64!"}"#.utf8)
        let error = #expect(throws: StoredRecordProblem.self) { try coder.opened(malformed) }
        #expect(error?.description.contains("not a well-formed sealed record") == true)
        #expect(throws: StoredRecordProblem.self) { try coder.decode(malformed) }
        let open = Data(#"{"body":"","id":"n1","title":"open"}"#.utf8)
        #expect(try coder.opened(open) == open)
        #expect(try coder.decode(open) == Note(id: "n1", title: "open"))
        // A sealed record keeps its schema version in the clear, and opens to the sealed one.
        let versioned = Data(#"{"$schemaVersion":3,"body":"","id":"n1","title":"v3"}"#.utf8)
        let sealed = try coder.sealed(versioned)
        #expect(try Self.members(sealed)["$schemaVersion"] as? Int == 3)
        #expect(coder.storedVersion(of: sealed) == 3)
        #expect(try coder.opened(sealed) == versioned)
    }

    @Test func anAssetReferenceStaysVisibleOutsideTheSeal() throws {
        let sealer = FieldSealer(cipher: Self.cipher)
        let digest = String(repeating: "ab", count: 32)
        let open = Data(#"{"id":"n1","picture":{"$asset":"\#(digest)","size":3}}"#.utf8)
        let sealed = try sealer.seal(open)
        var digests = Set<String>()
        #expect(AssetReferences.collect(in: sealed, into: &digests) == nil)
        #expect(digests == [digest])
        #expect(try sealer.open(sealed) == open)
        #expect(!Self.contains(sealed, "picture"))
    }
}
