import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5))) struct WaitUntilTests {
    private struct Boom: Error, CustomStringConvertible {
        var description: String { "boom" }
    }

    @Test func returnsTheFirstElementThatSatisfiesTheCondition() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        for value in 1...5 { continuation.yield(value) }
        let found = try await values.waitUntil(timeout: .seconds(120)) { $0 >= 3 }
        #expect(found == 3)
    }

    @Test func waitsForElementsThatArriveLater() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        let waiter = Task { try await values.waitUntil(timeout: .seconds(120)) { $0 == 42 } }
        Thread {
            for value in 40...45 { continuation.yield(value) }
        }.start()
        #expect(try await result(of: waiter).get() == 42)
    }

    @Test func aTimeoutShowsTheLastElementSeen() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: [String].self)
        continuation.yield(["a"])
        continuation.yield(["a", "b"])
        let error = await expectError(.timedOut) {
            try await values.waitUntil(timeout: .milliseconds(50), "three items") { $0.count == 3 }
        }
        let message = error?.message ?? ""
        #expect(message.contains("timed out"), "\(message)")
        #expect(message.contains("for three items"), "\(message)")
        #expect(message.contains("2 elements seen"), "\(message)")
        #expect(message.contains(#"["a", "b"]"#), "\(message)")
        continuation.finish()
    }

    @Test func aTimeoutWithNothingSeenSaysSo() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        let error = await expectError(.timedOut) {
            try await values.waitUntil(timeout: .milliseconds(20)) { _ in true }
        }
        #expect(error?.message.contains("no element was seen") == true)
        continuation.finish()
    }

    @Test func aSequenceThatEndsFirstFailsWithTheLastElement() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        continuation.yield(7)
        continuation.finish()
        let error = await expectError(.timedOut) {
            try await values.waitUntil(timeout: .seconds(3600)) { $0 > 10 }
        }
        #expect(error?.message.contains("ended") == true)
        #expect(error?.message.contains("the last one: 7") == true)
    }

    @Test func aSequenceThatFailsFirstReportsItsError() async throws {
        let (values, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
        continuation.yield(1)
        continuation.finish(throwing: Boom())
        let error = await expectError(.timedOut) {
            try await values.waitUntil(timeout: .seconds(3600)) { $0 > 10 }
        }
        #expect(error?.message.contains("failed") == true)
        #expect(error?.underlying is Boom)
    }

    @Test func aConditionThatThrowsEndsTheWait() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        continuation.yield(1)
        let error = await expectError(.timedOut) {
            try await values.waitUntil(timeout: .seconds(3600)) { _ in throw Boom() }
        }
        #expect(error?.message.contains("the condition threw boom") == true)
        #expect(error?.underlying is Boom)
        continuation.finish()
    }

    @Test func cancellingTheWaitingTaskEndsTheWait() async throws {
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        let waiter = Task { try await values.waitUntil(timeout: .seconds(3600)) { _ in false } }
        waiter.cancel()
        await expectError(.cancelled) { try await result(of: waiter).get() }
        continuation.finish()
    }

    @Test func theReadingTaskIsCancelledWhenTheWaitEnds() async throws {
        let (ended, endedSignal) = AsyncStream.makeStream(of: Bool.self)
        let (values, continuation) = AsyncStream.makeStream(of: Int.self)
        continuation.onTermination = { termination in
            if case .cancelled = termination { endedSignal.yield(true) }
        }
        continuation.yield(1)
        try await values.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        // The reader found its element and returned; a wait that times out cancels it.
        let (idle, idleContinuation) = AsyncStream.makeStream(of: Int.self)
        idleContinuation.onTermination = { termination in
            if case .cancelled = termination { endedSignal.yield(true) }
        }
        await expectError(.timedOut) { try await idle.waitUntil(timeout: .milliseconds(20)) { _ in true } }
        try await ended.waitUntil(timeout: .seconds(120), "the idle stream's reader to be cancelled") { $0 }
        continuation.finish()
    }
}
