import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5))) struct ErrorNotificationRecorderTests {
    private func post(_ error: MirrorError, on center: NotificationCenter) {
        center.post(name: .mirrorError, object: error)
    }

    private func error(_ kind: MirrorError.Kind, type: String = "Todo", scope: Scope = .public) -> MirrorError {
        MirrorError(kind, "test error \(kind)", recordIDs: ["r1"], recordType: type, scope: scope)
    }

    @Test func recordsExactlyOneEntryPerPostedNotificationInOrder() {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        #expect(recorder.count == 0)
        post(error(.diskFull), on: center)
        post(error(.ioFailure), on: center)
        post(error(.diskFull), on: center)
        #expect(recorder.count == 3)
        #expect(recorder.errors.map(\.kind) == [.diskFull, .ioFailure, .diskFull])
        #expect(recorder.errors.first?.recordIDs == ["r1"])
        // Other notification names are not recorded.
        center.post(name: Notification.Name("Unrelated"), object: error(.diskFull))
        #expect(recorder.count == 3)
        recorder.reset()
        #expect(recorder.errors.isEmpty)
        post(error(.readOnly), on: center)
        #expect(recorder.errors.map(\.kind) == [.readOnly])
    }

    @Test func concurrentPostsAreEachRecordedOnce() async {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    center.post(name: .mirrorError, object: MirrorError(.ioFailure, "error \(index)"))
                }
            }
        }
        #expect(recorder.count == 200)
        #expect(Set(recorder.errors.map(\.message)).count == 200)
    }

    @Test func filtersByRecordTypeScopeAndKind() {
        let center = NotificationCenter()
        let byType = ErrorNotificationRecorder(center: center, recordType: "Todo")
        let byScope = ErrorNotificationRecorder(center: center, recordType: "Todo", scope: .private)
        let byKind = ErrorNotificationRecorder(center: center, recordType: "Todo", kinds: [.diskFull, .readOnly])
        let custom = ErrorNotificationRecorder(center: center) { $0.recordIDs.contains("special") }
        post(error(.diskFull), on: center)
        post(error(.ioFailure, scope: .private), on: center)
        post(error(.readOnly, type: "Note"), on: center)
        post(MirrorError(.notFound, "special", recordIDs: ["special"]), on: center)
        #expect(byType.errors.map(\.kind) == [.diskFull, .ioFailure])
        #expect(byScope.errors.map(\.kind) == [.ioFailure])
        #expect(byKind.errors.map(\.kind) == [.diskFull])
        #expect(custom.errors.map(\.kind) == [.notFound])
    }

    @Test func observesTheDefaultCenterByDefault() {
        // Other tests may post on `.default` at the same time: filter by a record type of our own.
        let recordType = "Recorder-" + UUID().uuidString
        let recorder = ErrorNotificationRecorder(recordType: recordType)
        NotificationCenter.default.post(name: .mirrorError, object: error(.diskFull, type: recordType))
        #expect(recorder.errors.map(\.kind) == [.diskFull])
    }

    @Test func notificationsWithoutAMirrorErrorAreCountedNotRecorded() {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        center.post(name: .mirrorError, object: nil)
        center.post(name: .mirrorError, object: "not an error")
        #expect(recorder.count == 0)
        #expect(recorder.malformedCount == 2)
    }

    @Test func stopEndsRecordingAndKeepsWhatWasRecorded() {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        post(error(.diskFull), on: center)
        recorder.stop()
        recorder.stop()
        post(error(.ioFailure), on: center)
        #expect(recorder.errors.map(\.kind) == [.diskFull])
    }

    @Test func theCenterDoesNotKeepARecorderAlive() {
        let center = NotificationCenter()
        weak var released: ErrorNotificationRecorder?
        do {
            let recorder = ErrorNotificationRecorder(center: center)
            released = recorder
            post(error(.diskFull), on: center)
            #expect(recorder.count == 1)
        }
        #expect(released == nil)
        // Posting after the recorder is gone is harmless.
        post(error(.diskFull), on: center)
    }

    @Test func waitForErrorsReturnsAtOnceWhenEnoughArrivedAlready() async throws {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        post(error(.diskFull), on: center)
        post(error(.ioFailure), on: center)
        let errors = try await recorder.waitForErrors(count: 2, timeout: .seconds(120))
        #expect(errors.map(\.kind) == [.diskFull, .ioFailure])
        #expect(try await recorder.waitForErrors(count: 0).count == 2)
    }

    @Test func waitForErrorsWakesOnTheNotificationsThemselves() async throws {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        let waiter = Task { try await recorder.waitForErrors(count: 3, timeout: .seconds(120)) }
        // Posted from other threads, while the waiter is (or is about to be) suspended.
        for kind in [MirrorError.Kind.diskFull, .ioFailure, .readOnly] {
            let post = Thread { center.post(name: .mirrorError, object: MirrorError(kind, "from a thread")) }
            post.start()
        }
        let errors = try await result(of: waiter).get()
        #expect(errors.count == 3)
        #expect(Set(errors.map(\.kind)) == [.diskFull, .ioFailure, .readOnly])
    }

    @Test func severalWaitsEndWhenTheirOwnCountIsReached() async throws {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        let (progress, step) = AsyncStream.makeStream(of: Int.self)
        let one = Task {
            let errors = try await recorder.waitForErrors(count: 1, timeout: .seconds(120))
            step.yield(1)
            return errors.count
        }
        let two = Task { try await recorder.waitForErrors(count: 2, timeout: .seconds(120)).count }
        post(error(.diskFull), on: center)
        // The first wait ends on the first error while the second keeps waiting.
        try await progress.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        #expect(try await result(of: one).get() == 1)
        post(error(.ioFailure), on: center)
        #expect(try await result(of: two).get() == 2)
    }

    @Test func aTimedOutWaitSaysHowManyArrivedAndWhat() async throws {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        post(MirrorError(.diskFull, "the disk is full", recordIDs: ["r7"]), on: center)
        let timedOut = await expectError(.timedOut) {
            try await recorder.waitForErrors(count: 3, timeout: .milliseconds(50))
        }
        let message = timedOut?.message ?? ""
        #expect(message.contains("waiting for 3 error notifications"), "\(message)")
        #expect(message.contains("1 arrived"), "\(message)")
        #expect(message.contains("the disk is full"), "\(message)")
        #expect(message.contains("r7"), "\(message)")
        let none = await expectError(.timedOut) {
            try await ErrorNotificationRecorder(center: center).waitForErrors(count: 1, timeout: .milliseconds(10))
        }
        #expect(none?.message.contains("0 arrived") == true)
    }

    @Test func aCancelledWaitEndsWithACancellationError() async throws {
        let center = NotificationCenter()
        let recorder = ErrorNotificationRecorder(center: center)
        let waiter = Task { try await recorder.waitForErrors(count: 1, timeout: .seconds(3600)) }
        waiter.cancel()
        await expectError(.cancelled) { try await result(of: waiter).get() }
        // Errors after the cancelled wait are still recorded.
        post(error(.diskFull), on: center)
        #expect(recorder.count == 1)
    }
}
