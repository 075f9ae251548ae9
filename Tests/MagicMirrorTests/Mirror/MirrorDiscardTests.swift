import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// A change that can never be committed can be abandoned: a failure that guarantees nothing
/// was stored says so, a never-stored record that is removed again leaves nothing to do, and
/// `discardPendingChange(recordID:)` drops a held change and shows the stored value again.
@Suite(.timeLimit(.minutes(5))) struct MirrorDiscardTests {
    /// The adversary's case: an invalid id, removed again, made every later `flush()` throw.
    @Test func aRefusedRecordRemovedAgainIsForgotten() async throws {
        let database = try TemporaryDatabase(name: "discard")
        defer { try? database.remove() }
        let mirror = try await Mirror<Chore>(database: database)
        mirror.dataModel.append(Chore(id: "bad/id", title: "bad"))
        let failure = try await flushFailure(of: mirror)
        #expect(failure.kind == .invalidName)
        #expect(failure.nothingStored)
        #expect(mirror.pendingChanges.map(\.recordID) == ["bad/id"])

        mirror.dataModel.remove(recordID: "bad/id")
        #expect(mirror.pendingChanges.isEmpty)
        let good = Chore(title: "good")
        mirror.dataModel.append(good)
        try await mirror.flush()
        try await mirror.flush()
        #expect(try await storedRecords(Chore.self, in: database).keys.sorted() == [good.id])
        #expect(mirror.pendingChanges.isEmpty)
    }

    /// The JSON-file database marks what it refused before writing; the mirror's removal of a
    /// record whose attempt may have been stored still deletes it, to be sure.
    @Test func aFailureThatMayHaveStoredKeepsTheDeleteOfARemovedRecord() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        database.silenceNotifications()
        let mirror = try await Mirror<Chore>(database: database)
        let chore = Chore(title: "maybe stored")
        database.throwAfterStoring(recordID: chore.id)
        mirror.dataModel.append(chore)
        let failure = try await flushFailure(of: mirror)
        #expect(!failure.nothingStored)

        mirror.dataModel.remove(recordID: chore.id)
        #expect(mirror.pendingChanges.map(\.action) == [.delete])
        try await mirror.flush()
        #expect(try await storedRecords(Chore.self, in: database).isEmpty)
    }

    @Test func aDiscardedEditShowsTheStoredValueAgain() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        var chore = Chore(title: "stored")
        mirror.dataModel.append(chore)
        try await mirror.flush()

        database.failNextCommits(1, with: .invalidRecord)
        mirror.dataModel[recordID: chore.recordID]?.title = "refused"
        _ = try await flushFailure(of: mirror)
        #expect(mirror.pendingChanges.first?.isOnHold == true)
        #expect(mirror.dataModel.first?.title == "refused")

        #expect(mirror.discardPendingChange(recordID: chore.recordID))
        #expect(mirror.dataModel.map(\.title) == ["stored"])
        #expect(mirror.pendingChanges.isEmpty)
        try await mirror.flush()
        #expect(!mirror.discardPendingChange(recordID: chore.recordID), "nothing is waiting any more")

        // The record is edited as usual afterwards, from the stored version.
        chore.title = "edited later"
        mirror.dataModel[recordID: chore.recordID] = chore
        try await mirror.flush()
        #expect(try await storedRecords(Chore.self, in: database)[chore.id]?.title == "edited later")
    }

    @Test func aDiscardedCreationAndADiscardedRemovalUndoTheirChange() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        let kept = Chore(title: "kept")
        mirror.dataModel.append(kept)
        try await mirror.flush()

        database.failNextCommits(1, with: .invalidRecord)
        let created = Chore(title: "created")
        mirror.dataModel.append(created)
        mirror.dataModel.remove(recordID: kept.recordID)
        _ = try await flushFailure(of: mirror)
        #expect(mirror.dataModel.map(\.title) == ["created"])

        #expect(mirror.discardPendingChange(recordID: created.recordID))
        #expect(mirror.discardPendingChange(recordID: kept.recordID))
        #expect(mirror.dataModel.map(\.title) == ["kept"])
        try await mirror.flush()
        #expect(try await storedRecords(Chore.self, in: database).keys.sorted() == [kept.id])
    }

    /// An attempt that failed without a guarantee may have been stored after all: after the
    /// discard, the mirror reads the database and shows what is there. (The test database
    /// delivers no notifications, so only that read can show it.)
    @Test func aDiscardAfterAnAttemptThatWasStoredShowsTheStoredRecord() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        database.silenceNotifications()
        let mirror = try await Mirror<Chore>(database: database)
        let chore = Chore(title: "stored anyway")
        database.throwAfterStoring(recordID: chore.id)
        mirror.dataModel.append(chore)
        _ = try await flushFailure(of: mirror)
        #expect(mirror.pendingChanges.first?.isOnHold == true)

        #expect(mirror.discardPendingChange(recordID: chore.recordID))
        try await mirror.waitUntil(timeout: .seconds(120), "the stored record to show") {
            $0.map(\.title) == ["stored anyway"]
        }
        #expect(mirror.pendingChanges.isEmpty)
        try await mirror.flush()
    }

    @Test func aChangeBeingCommittedIsNotDiscarded() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Chore>(database: database)
        database.hold()
        let chore = Chore(title: "in flight")
        mirror.dataModel.append(chore)
        try await database.heldCommits.wait(forCount: 1, "the commit to start")
        #expect(!mirror.discardPendingChange(recordID: chore.recordID))
        database.release()
        try await mirror.flush()
        #expect(mirror.dataModel.map(\.title) == ["in flight"])
        #expect(try await storedRecords(Chore.self, in: database).count == 1)
    }
}
