import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// `Mirror.waitForRecord(withID:timeout:)`: the app's way to wait for a record that another
/// writer is about to save (issue #36). `flush()` is the way to wait for one's own changes.
@Suite(.timeLimit(.minutes(5))) struct WaitForRecordTests {
    struct Memo: Recordable {
        var id: String
        var text: String
    }

    @Test func aRecordShownAlreadyIsReturnedAtOnce() async throws {
        let mirror = try await Mirror<Memo>(database: InMemoryDatabase())
        mirror.dataModel.append(Memo(id: "m1", text: "here"))
        #expect(try await mirror.waitForRecord(withID: "m1", timeout: .zero).text == "here")
    }

    @Test func aRecordAnotherWriterSavesIsReturnedWhenItArrives() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Memo>(database: database)
        let waiting = Task { try await mirror.waitForRecord(withID: "m2") }
        try await Task.sleep(for: .milliseconds(20))
        try await database.simulateSave(Memo(id: "other", text: "not this one"))
        try await database.simulateSave(Memo(id: "m2", text: "from the phone"))
        #expect(try await waiting.value == Memo(id: "m2", text: "from the phone"))
    }

    @Test func aRecordThatNeverComesTimesOutNamingIt() async throws {
        let mirror = try await Mirror<Memo>(database: InMemoryDatabase())
        let error = await #expect(throws: MirrorError.self) {
            try await mirror.waitForRecord(withID: "never", timeout: .milliseconds(50))
        }
        #expect(error?.kind == .timedOut)
        #expect(error?.recordIDs == ["never"])
        #expect(error?.message.contains("record never did not reach the mirror of public/Memo") == true,
                "\(error?.message ?? "")")
    }

    @Test func aCancelledWaitThrowsCancelled() async throws {
        let mirror = try await Mirror<Memo>(database: InMemoryDatabase())
        let waiting = Task { try await mirror.waitForRecord(withID: "never") }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        let error = await #expect(throws: MirrorError.self) { try await waiting.value }
        #expect(error?.kind == .cancelled)
    }

    @Test func aStoredRecordThatDoesNotDecodeEndsTheWaitWithItsError() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Memo>(
            database: database, configuration: MirrorConfiguration(undecodableRecords: .skip(log: { _ in })))
        let waiting = Task { try await mirror.waitForRecord(withID: "bad") }
        try await database.simulateSave(id: "bad", fields: Data(#"{"id":"bad","text":7}"#.utf8), in: .public("Memo"))
        let error = await #expect(throws: MirrorError.self) { try await waiting.value }
        #expect(error?.kind == .decodingFailed)
        #expect(error?.recordIDs == ["bad"])
    }
}
