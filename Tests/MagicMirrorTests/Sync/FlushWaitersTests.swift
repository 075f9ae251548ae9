import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct FlushWaitersTests {
    @Test func aFlushEndsOnceEveryChangeUpToItsTargetIsCommitted() {
        var waiters = FlushWaiters<String>()
        waiters.add(1, target: 3, "early")
        waiters.add(2, target: 6, "late")
        let none = waiters.finished(oldestPending: 2, failure: nil)
        #expect(none.isEmpty)
        let first = waiters.finished(oldestPending: 4, failure: nil)
        #expect(first.map(\.0) == ["early"] && first.allSatisfy { $0.1 == nil })
        let rest = waiters.finished(oldestPending: nil, failure: nil)
        #expect(rest.map(\.0) == ["late"])
        #expect(waiters.isEmpty)
    }

    @Test func aFailureEndsOnlyTheFlushesThatWaitForTheFailedChange() {
        var waiters = FlushWaiters<String>()
        waiters.add(1, target: 3, "before")
        waiters.add(2, target: 8, "after")
        let error = MirrorError(.invalidRecord, "refused")
        let ended = waiters.finished(oldestPending: 2, failure: (error, 5))
        #expect(ended.map(\.0) == ["after"])
        #expect(ended.first?.1?.kind == .invalidRecord)
        let removed = waiters.remove(1)
        let again = waiters.remove(1)
        #expect(removed == "before")
        #expect(again == nil)
    }
}
