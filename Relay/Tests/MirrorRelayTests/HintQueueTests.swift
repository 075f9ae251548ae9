import MagicMirror
@testable import MirrorRelayServer
import Testing

/// A client's queue of hints stays bounded however many commits it misses.
@Suite(.timeLimit(.minutes(5)))
struct HintQueueTests {
    static func hint(_ zone: String, _ reason: RemoteNotification.Reason, _ ids: [String], _ sequence: Int, writer: String? = "w")
        -> RemoteNotification
    {
        RemoteNotification(
            databaseIdentifier: "db", zone: .public(zone), recordIDs: ids, reason: reason,
            token: ChangeToken(generation: 0, sequence: sequence), writer: writer)
    }

    @Test func hintsOfOneZoneAndReasonCoalesce() {
        var queue = HintQueue()
        queue.add(Self.hint("Todo", .updated, ["a"], 1))
        queue.add(Self.hint("Todo", .updated, ["b", "a"], 3))
        queue.add(Self.hint("Todo", .created, ["c"], 2))
        queue.add(Self.hint("Note", .updated, ["n"], 4, writer: "other"))
        queue.add(Self.hint("Note", .updated, ["m"], 5, writer: "another"))
        #expect(queue.count == 3)
        let hints = queue.drain()
        #expect(hints.map(\.zone) == [.public("Todo"), .public("Todo"), .public("Note")])
        #expect(hints[0].recordIDs == ["a", "b"])
        #expect(hints[0].token.sequence == 3)
        #expect(hints[0].writer == "w")
        #expect(hints[1].reason == .created)
        #expect(hints[2].writer == nil)
        #expect(hints[2].token.sequence == 5)
        #expect(queue.isEmpty)
        #expect(queue.drain().isEmpty)
    }

    @Test func aMissedFloodStaysBounded() {
        var queue = HintQueue(maximumIDs: 10)
        for sequence in 1...10_000 {
            queue.add(Self.hint("Todo", .updated, ["r\(sequence)"], sequence))
        }
        #expect(queue.count == 1)
        let hint = queue.drain().first
        #expect(hint?.recordIDs.count == 10)
        #expect(hint?.token.sequence == 10_000)
        var big = HintQueue(maximumIDs: 10)
        big.add(Self.hint("Todo", .deleted, (0..<50).map { "r\($0)" }, 1))
        #expect(big.drain().first?.recordIDs.count == 10)
    }

    @Test func zonesNoLongerWatchedLoseTheirHints() {
        var queue = HintQueue()
        queue.add(Self.hint("Todo", .updated, ["a"], 1))
        queue.add(Self.hint("Note", .updated, ["n"], 2))
        queue.remove(zones: [.public("Todo")])
        #expect(queue.drain().map(\.zone) == [.public("Note")])
    }
}
