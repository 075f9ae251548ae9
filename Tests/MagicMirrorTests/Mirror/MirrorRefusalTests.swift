import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A change the database refuses by a rule of its own (``MirrorError/Kind/refused``: a denied
/// delete, an edit of a record shared read-only) is dropped: the mirror shows the record as
/// stored again, reports the refusal once, and `flush()` throws it; the batch's other changes
/// are committed.
@Suite(.timeLimit(.minutes(5))) struct MirrorRefusalTests {
    @Test func aRefusedDeleteBringsTheRecordBack() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        let kept = Chore(title: "kept")
        mirror.dataModel.append(kept)
        try await mirror.flush()
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains(kept.id) }

        database.failNextCommits(1, with: .refused, recordIDs: [kept.id])
        mirror.dataModel.remove(recordID: kept.recordID)
        #expect(mirror.dataModel.isEmpty, "the removal shows at once")
        let failure = try await flushFailure(of: mirror)
        #expect(failure.kind == .refused)
        #expect(failure.recordIDs.contains(kept.id))
        #expect(mirror.dataModel.map(\.title) == ["kept"], "the refused removal is undone")
        #expect(mirror.pendingChanges.isEmpty)
        try await mirror.flush()

        #expect(recorder.errors.map(\.kind) == [.refused], "reported once")
        #expect(try await storedRecords(Chore.self, in: database).keys.sorted() == [kept.id])
    }

    @Test func onlyTheRefusedChangeOfABatchIsDropped() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        var shared = Chore(title: "stored")
        mirror.dataModel.append(shared)
        try await mirror.flush()

        // A change held in flight, so that the next batch holds both changes below.
        database.hold()
        mirror.dataModel.append(Chore(title: "first"))
        try await database.heldCommits.wait(forCount: 1, "the first commit to start")
        let created = Chore(title: "created")
        mirror.dataModel.append(created)
        shared.title = "refused edit"
        mirror.dataModel[recordID: shared.recordID] = shared
        database.poison(shared.id, with: .refused, namingIt: true)
        database.release()
        let failure = try await flushFailure(of: mirror)
        #expect(failure.kind == .refused)

        try await mirror.flush()
        #expect(Set(mirror.dataModel.map(\.title)) == ["stored", "first", "created"])
        let stored = try await storedRecords(Chore.self, in: database)
        #expect(stored[shared.id]?.title == "stored")
        #expect(stored[created.id]?.title == "created")
        #expect(stored.count == 3)
        #expect(mirror.pendingChanges.isEmpty)
        #expect(database.attempts.items.contains { $0.recordIDs.count == 2 && $0.error?.kind == .refused },
                "the refused edit and the creation were sent together")
    }

    /// A refusal that names no record is narrowed down by sending the batch one change at a
    /// time, like any permanent failure; only the refused change is dropped.
    @Test func aRefusalThatNamesNoRecordIsIsolated() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        let refused = Chore(title: "refused")
        let accepted = Chore(title: "accepted")
        database.poison(refused.id, with: .refused)
        mirror.dataModel.append(contentsOf: [refused, accepted])
        let failure = try await flushFailure(of: mirror)
        #expect(failure.kind == .refused)

        try await mirror.flush()
        #expect(mirror.dataModel.map(\.title) == ["accepted"], "a refused creation leaves nothing")
        #expect(try await storedRecords(Chore.self, in: database).keys.sorted() == [accepted.id])
        #expect(mirror.pendingChanges.isEmpty)
    }

    /// A flush called while the refused change is being committed throws once the record
    /// shows again (whether it was already waiting when the refusal came, or called just
    /// after it: both must hold).
    @Test func theWaitingFlushThrowsOnceTheRecordShowsAgain() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        let kept = Chore(title: "kept")
        mirror.dataModel.append(kept)
        try await mirror.flush()

        database.hold()
        mirror.dataModel.remove(recordID: kept.recordID)
        try await database.heldCommits.wait(forCount: 1, "the removal's commit to start")
        database.poison(kept.id, with: .refused, namingIt: true)
        let flush = Task { try await mirror.flush() }
        database.release()
        let failure = await #expect(throws: MirrorError.self) { try await flush.value }
        #expect(failure?.kind == .refused)
        #expect(mirror.dataModel.map(\.title) == ["kept"], "shown again before flush() threw")
    }

    /// A change refused before any flush waited for it: the next flush throws the refusal,
    /// once.
    @Test func aRefusalNoFlushWaitedForIsThrownByTheNextFlush() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        let kept = Chore(title: "kept")
        mirror.dataModel.append(kept)
        try await mirror.flush()

        database.poison(kept.id, with: .refused, namingIt: true)
        mirror.dataModel.remove(recordID: kept.recordID)
        try await mirror.waitUntil(timeout: .seconds(120), "the refused removal undone") {
            $0.map(\.title) == ["kept"]
        }
        #expect(mirror.pendingChanges.isEmpty)
        let failure = try await flushFailure(of: mirror)
        #expect(failure.kind == .refused)
        try await mirror.flush()
    }

    @Test func aRefusalIsNotRetried() {
        #expect(!MirrorError.Kind.refused.isTransient)
    }
}
