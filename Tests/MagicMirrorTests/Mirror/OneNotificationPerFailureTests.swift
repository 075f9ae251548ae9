import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Every failure posts one `.mirrorError` notification (issue #36): a record referring to an
/// asset of another zone, appended then flushed, posted it twice (the background attempt,
/// then the flush's retry of the change on hold). A change on hold that a flush tries again
/// and that fails the same way meets the same failure: the flush throws it, nothing is posted
/// again. A failure that differs is a new one, and is posted. (Transient failures are posted
/// at each attempt: MirrorFaultInjectionTests.)
@Suite(.timeLimit(.minutes(5))) struct OneNotificationPerFailureTests {
    struct Attachment: Recordable {
        var id: String
        var file: Asset
    }

    @Test(arguments: ["memory", "temporary"])
    func anAssetOfAnotherZoneIsPostedOnceHoweverOftenItIsFlushed(double: String) async throws {
        let id = "attachment-\(UUID().uuidString)"
        let memory = InMemoryDatabase()
        let database: any AssetDatabase = double == "memory" ? memory : try TemporaryDatabase()
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains(id) }
        let elsewhere = try await database.storeAsset(Data("picture".utf8), in: .public("Other"))
        let mirror = try await Mirror<Attachment>(
            database: database, configuration: MirrorConfiguration(retryDelay: .milliseconds(5)))
        let streamed = AsyncCollector(mirror.errors())

        mirror.dataModel.append(Attachment(id: id, file: elsewhere))
        for _ in 0..<3 {
            let error = await #expect(throws: MirrorError.self) { try await mirror.flush() }
            #expect(error?.kind == .notFound)
        }
        try await recorder.waitForErrors(count: 1, timeout: .seconds(120))
        #expect(recorder.errors.map(\.kind) == [.notFound], "\(recorder.errors)")
        try await streamed.wait(forCount: 1, "the error on the mirror's stream")
        let pending = try #require(mirror.pendingChanges.first)
        #expect(pending.failedAttempts >= 3, "each flush tried it again")
        #expect(pending.isOnHold)

        if double == "memory" {
            // Another failure: posted.
            memory.failNextCommits(1, with: .invalidRecord)
            await #expect(throws: MirrorError.self) { try await mirror.flush() }
            #expect(recorder.errors.map(\.kind) == [.notFound, .invalidRecord], "\(recorder.errors)")
        }

        // Stored in the record's zone, the asset is there: the next flush commits the change.
        _ = try await database.storeAsset(Data("picture".utf8), in: .public("Attachment"))
        try await mirror.flush()
        #expect(mirror.pendingChanges.isEmpty)
        #expect(recorder.count == (double == "memory" ? 2 : 1), "\(recorder.errors)")
        #expect(streamed.items.count == recorder.count, "the stream has what was posted: \(streamed.items)")
    }
}
