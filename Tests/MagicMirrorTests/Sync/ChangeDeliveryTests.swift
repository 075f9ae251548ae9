import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct ChangeDeliveryTests {
    private let change = MirrorChange<Chore>(
        kind: .inserted, recordID: "a", record: Chore(id: "a", title: "A"), origin: .remote, state: .committed)

    @Test func observersAreWokenOnlyAfterAChange() {
        var delivery = ChangeDelivery<Chore>()
        delivery.addObserver(delivery.makeNumber(), Wakeup())
        let before = delivery.drain()
        delivery.emit(change)
        let after = delivery.drain()
        let again = delivery.drain()
        #expect(before.observers.isEmpty)
        #expect(after.observers.count == 1)
        #expect(again.observers.isEmpty, "once per change")
    }

    @Test func aReportIsKeptAndPostedOnce() {
        var delivery = ChangeDelivery<Chore>()
        delivery.report(MirrorError(.ioFailure, "disk"), entry: "key")
        #expect(delivery.lastError?.kind == .ioFailure)
        let drained = delivery.drain()
        #expect(drained.reports.map(\.entry) == ["key"])
        let again = delivery.drain()
        #expect(again.reports.isEmpty)
        #expect(delivery.lastError?.kind == .ioFailure, "a drain keeps the last error")
    }

    @Test func handingOverMovesTheListenersAndKeepsTheLastError() async {
        var delivery = ChangeDelivery<Chore>()
        let (stream, continuation) = AsyncStream.makeStream(of: MirrorChange<Chore>.self)
        delivery.addChangeStream(delivery.makeNumber(), continuation)
        delivery.addObserver(delivery.makeNumber(), Wakeup())
        delivery.report(MirrorError(.ioFailure, "disk"))
        var moved = delivery.handOver()
        #expect(delivery.lastError?.kind == .ioFailure)
        let oldNumber = delivery.makeNumber()
        let movedNumber = moved.makeNumber()
        #expect(oldNumber < 0, "numbered apart from the mirror's")
        #expect(movedNumber == 3)
        delivery.emit(change)
        let oldDrained = delivery.drain()
        let movedDrained = moved.drain()
        #expect(oldDrained.observers.isEmpty)
        #expect(movedDrained.observers.count == 1, "the records changed as a whole")
        moved.emit(change)
        let closed = moved.close()
        for stream in closed.changeStreams { stream.finish() }
        var received: [String] = []
        for await change in stream { received.append(change.recordID) }
        #expect(received == ["a"])
    }

    @Test func aClosedDeliveryEndsNewStreamsAtOnce() async {
        var delivery = ChangeDelivery<Chore>()
        _ = delivery.close()
        let (stream, continuation) = AsyncStream.makeStream(of: MirrorError.self)
        delivery.addErrorStream(delivery.makeNumber(), continuation)
        var count = 0
        for await _ in stream { count += 1 }
        #expect(count == 0)
        #expect(delivery.isClosed)
    }
}
