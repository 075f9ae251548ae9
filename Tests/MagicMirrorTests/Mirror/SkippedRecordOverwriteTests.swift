import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A record the mirror skips (it does not decode: written by a newer version of the app,
/// say) is never overwritten by an edit that did not see it (issue #36): adding a record
/// with its id is refused visibly, the stored record survives, and
/// `discardSkippedRecord(recordID:)` is the explicit way to replace it. Each test uses ids of
/// its own, so the error recorders of tests running in parallel do not mix.
@Suite(.timeLimit(.minutes(5))) struct SkippedRecordOverwriteTests {
    /// The app's version 1: `size` is an `Int`.
    struct Setting: Recordable {
        var id: String
        var size = 1
    }

    static let zone = ZoneID.public("Setting")

    /// What version 2 of the app stored: `size` became a string, which version 1 cannot read.
    static func version2Fields(_ id: String) -> Data {
        Data(#"{"id":"\#(id)","size":"large","theme":"dark"}"#.utf8)
    }

    static let quiet = MirrorConfiguration(retryDelay: .milliseconds(5), undecodableRecords: .skip(log: { _ in }))

    /// A database with one record version 1 cannot decode, and a version-1 mirror of it.
    static func skipped(_ id: String, on database: some RecordDatabase) async throws -> (Mirror<Setting>, StoredRecord) {
        let zone = Self.zone
        _ = try await database.commit(
            [.save(id, fields: version2Fields(id), baseVersion: 0, timestamp: HybridLogicalClock.shared.now())],
            to: zone)
        let stored = try #require(try await database.fetch([id], in: zone).first)
        let mirror = try await Mirror<Setting>(database: database, configuration: quiet)
        #expect(mirror.skippedRecords.map(\.recordID) == [id])
        return (mirror, stored)
    }

    @Test(arguments: ["memory", "temporary"])
    func addingARecordWithASkippedRecordsIDIsRefusedAndTheStoredRecordSurvives(double: String) async throws {
        let id = "settings-\(UUID().uuidString)"
        let database: any RecordDatabase = double == "memory" ? InMemoryDatabase() : try TemporaryDatabase()
        let (mirror, stored) = try await Self.skipped(id, on: database)
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains(id) && $0.kind != .decodingFailed }
        let errors = AsyncCollector(mirror.errors())

        // Version 1 does not see the record and creates a default one with the same id.
        let other = Setting(id: "other-\(UUID().uuidString)")
        mirror.dataModel.append(contentsOf: [other, Setting(id: id, size: 2)])

        // Refused at once: the new value left the array, the other record of the edit went on.
        #expect(mirror.dataModel.map(\.id) == [other.id])
        let refusal = try #require(mirror.lastError)
        #expect(refusal.kind == .refused)
        #expect(refusal.recordIDs == [id])
        #expect(refusal.nothingStored)
        for words in ["record \(id)", "not saved", "does not decode as Setting", "skippedRecords",
                      "would overwrite", "kept", "discardSkippedRecord(recordID:)", "migration"] {
            #expect(refusal.message.contains(words), "\(words) in: \(refusal.message)")
        }
        #expect(mirror.skippedRecords.map(\.recordID) == [id])
        // The next flush throws it; the one after has nothing left to throw.
        await #expect(throws: MirrorError.self) { try await mirror.flush() }
        try await mirror.flush()

        // The stored record is the one version 2 wrote, untouched.
        let after = try #require(try await database.fetch([id], in: Self.zone).first)
        #expect(after.version == stored.version)
        #expect(after.fields == stored.fields)
        #expect(try await database.fetch([other.id], in: Self.zone).count == 1)

        // One error notification and one error on the stream, for one refused edit.
        try await errors.wait(forCount: 1, "the refusal on the stream")
        #expect(errors.items.filter { $0.kind == .refused }.count == 1)
        #expect(recorder.count == 1, "\(recorder.errors)")
        #expect(recorder.errors.first?.kind == .refused)

        // Inserting or assigning the whole array is refused the same way.
        mirror.dataModel.insert(Setting(id: id), at: 0)
        mirror.dataModel = [Setting(id: id), other]
        #expect(mirror.dataModel.map(\.id) == [other.id])
        #expect(try await database.fetch([id], in: Self.zone).first?.version == stored.version)
        #expect(recorder.count == 3, "one per refused edit: \(recorder.errors)")
    }

    @Test(arguments: ["memory", "temporary"])
    func discardSkippedRecordDeletesItOnPurposeAndFreesTheID(double: String) async throws {
        let id = "settings-\(UUID().uuidString)"
        let database: any RecordDatabase = double == "memory" ? InMemoryDatabase() : try TemporaryDatabase()
        let (mirror, _) = try await Self.skipped(id, on: database)

        try await mirror.discardSkippedRecord(recordID: id)
        #expect(mirror.skippedRecords.isEmpty)
        #expect(try await database.fetch([id], in: Self.zone).isEmpty, "deleted: fetch leaves it out")

        // The id is free: a new record, stored as this version writes it (nothing of the
        // discarded one is kept).
        mirror.dataModel.append(Setting(id: id, size: 2))
        try await mirror.flush()
        let stored = try #require(try await database.fetch([id], in: Self.zone).first)
        let fields = try #require(stored.fields)
        let object = try #require(try JSONSerialization.jsonObject(with: fields) as? [String: Any])
        #expect(object["size"] as? Int == 2)
        #expect(object["theme"] == nil, "\(object)")
        #expect(object["$schemaVersion"] == nil, "\(object)")
        // Another mirror reads it.
        let reader = try await Mirror<Setting>(database: database, configuration: Self.quiet)
        #expect(reader.dataModel.array == [Setting(id: id, size: 2)])
    }

    @Test func discardSkippedRecordRefusesWhatIsNotSkipped() async throws {
        let id = "settings-\(UUID().uuidString)"
        let database = InMemoryDatabase()
        let (mirror, stored) = try await Self.skipped(id, on: database)
        let shown = Setting(id: "shown-\(UUID().uuidString)")
        mirror.dataModel.append(shown)
        try await mirror.flush()

        let notSkipped = await #expect(throws: MirrorError.self) {
            try await mirror.discardSkippedRecord(recordID: shown.id)
        }
        #expect(notSkipped?.kind == .notFound)
        #expect(notSkipped?.message.contains("dataModel.remove(recordID:)") == true, "\(notSkipped?.message ?? "")")
        #expect(mirror.dataModel.array == [shown])
        let unknown = await #expect(throws: MirrorError.self) {
            try await mirror.discardSkippedRecord(recordID: "nobody")
        }
        #expect(unknown?.kind == .notFound)
        #expect(database.storedRecord(id, in: Self.zone)?.version == stored.version)
    }

    @Test func discardSkippedRecordDeletesNothingThatChangedSince() async throws {
        let id = "settings-\(UUID().uuidString)"
        let database = InMemoryDatabase()
        let (mirror, stored) = try await Self.skipped(id, on: database)
        // Another writer saves a newer version the mirror has not pulled yet (its reads wait).
        database.readLatency = .seconds(3600)
        let newer = try await database.simulateSave(id: id, fields: Self.version2Fields(id), in: Self.zone)
        #expect(newer.version > stored.version)

        let conflict = await #expect(throws: MirrorError.self) { try await mirror.discardSkippedRecord(recordID: id) }
        #expect(conflict?.kind == .conflict)
        #expect(conflict?.message.contains("not discarded") == true, "\(conflict?.message ?? "")")
        #expect(database.storedRecord(id, in: Self.zone)?.version == newer.version)
        #expect(database.storedRecord(id, in: Self.zone)?.isDeleted == false)
        database.readLatency = .zero
    }

    /// The mirror has not pulled the record yet when it adds one with its id: the commit
    /// conflicts, and the conflict is not settled by overwriting what it cannot read.
    @Test func aNewRecordThatMeetsAnUndecodableStoredOneIsHeldNotSaved() async throws {
        let id = "settings-\(UUID().uuidString)"
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Setting>(database: database, configuration: Self.quiet)
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains(id) }
        database.readLatency = .seconds(3600)
        let stored = try await database.simulateSave(id: id, fields: Self.version2Fields(id), in: Self.zone)

        mirror.dataModel.append(Setting(id: id, size: 2))
        let error = try await mirror.waitForLastError(timeout: .seconds(120)) { $0.recordIDs == [id] }
        #expect(error.kind == .conflict)
        for words in ["not saved", "does not decode as Setting", "kept", "discardPendingChange(recordID:)",
                      "discardSkippedRecord(recordID:)"] {
            #expect(error.message.contains(words), "\(words) in: \(error.message)")
        }
        #expect(mirror.pendingChanges.map(\.recordID) == [id])
        #expect(mirror.pendingChanges.first?.isOnHold == true)
        #expect(database.storedRecord(id, in: Self.zone)?.fields == stored.fields)
        // A flush tries it again: the same failure, thrown, not posted twice.
        await #expect(throws: MirrorError.self) { try await mirror.flush() }
        await #expect(throws: MirrorError.self) { try await mirror.flush() }
        #expect(database.storedRecord(id, in: Self.zone)?.fields == stored.fields)
        #expect(recorder.errors.map(\.kind) == [.conflict], "\(recorder.errors)")

        // The way out the message gives: drop the local value; the stored record is skipped.
        #expect(mirror.discardPendingChange(recordID: id))
        #expect(mirror.dataModel.isEmpty)
        #expect(mirror.skippedRecords.map(\.recordID) == [id])
        try await mirror.discardSkippedRecord(recordID: id)
        mirror.dataModel.append(Setting(id: id, size: 3))
        try await mirror.flush()
        #expect(try database.records(Setting.self).map(\.size) == [3])
        database.readLatency = .zero
    }
}
