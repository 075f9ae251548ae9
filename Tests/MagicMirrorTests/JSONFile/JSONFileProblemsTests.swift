import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// A JSON-file engine's problem log: each problem is kept and posted once per key, and
/// the log keeps the latest problems only.
@Suite(.timeLimit(.minutes(5))) struct JSONFileProblemsTests {
    @Test func aProblemIsKeptAndPostedOncePerKey() async throws {
        let center = NotificationCenter()
        let problems = JSONFileProblems(center: center)
        let recorder = ErrorNotificationRecorder(center: center)
        defer { recorder.stop() }
        let key = "problems-test"
        let first = MirrorError(.corruptEntry, "first \(key)")

        problems.report(first, key: key)
        problems.report(MirrorError(.corruptEntry, "again \(key)"), key: key)
        problems.report(MirrorError(.ioFailure, "other \(key)"), key: key + "-other")

        #expect(problems.all.map(\.message) == ["first \(key)", "other \(key)"])
        #expect(problems.wasReported(key))
        #expect(!problems.wasReported(key + "-unknown"))
        #expect(recorder.errors.map(\.message) == ["first \(key)", "other \(key)"])
    }

    @Test func theLogKeepsTheLatestProblems() {
        let problems = JSONFileProblems(center: NotificationCenter())
        let capacity = OncePerKey<String>.defaultCapacity
        for index in 0...capacity {
            problems.report(MirrorError(.corruptEntry, "problem \(index)"), key: "problem \(index)")
        }
        let all = problems.all
        #expect(all.count == capacity)
        #expect(all.first?.message == "problem 1")
        #expect(all.last?.message == "problem \(capacity)")
    }
}
