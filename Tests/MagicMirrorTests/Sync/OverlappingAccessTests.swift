import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Reading a mirror from inside a mutation of its `dataModel` (a `removeAll(where:)`
/// predicate, say): its other state reads safely; its records stop the program with a
/// message that says what happened.
@Suite(.timeLimit(.minutes(5))) struct OverlappingAccessTests {
    @Test func theMirrorsOtherStateReadsSafelyInsideAMutation() async throws {
        let mirror = try await Mirror<Chore>(database: InMemoryDatabase())
        mirror.dataModel.append(Chore(id: "a", title: "A"))
        mirror.dataModel.append(Chore(id: "b", title: "B"))
        var seen: [(pending: Int, zone: ZoneID, failed: Bool, hasPending: Bool)] = []
        mirror.dataModel.removeAll { chore in
            seen.append((
                mirror.pendingChanges.count, mirror.zone, mirror.lastError != nil,
                mirror.hasPendingChanges))
            return chore.id == "a"
        }
        #expect(seen.count == 2)
        #expect(seen.allSatisfy { $0.zone == .public("Chore") && !$0.failed })
        #expect(mirror.dataModel.map(\.id) == ["b"])
        try await mirror.flush()
        #expect(mirror.pendingChanges.isEmpty)
    }

    @Test func readingTheRecordsInsideAMutationStopsWithAClearMessage() async throws {
        let crashed = try await MirrorWorkerRun.run(["overlapping-read", "records"])
        #expect(crashed.status != 0)
        #expect(!crashed.standardOutput.contains("survived"))
        #expect(
            crashed.standardError.contains("dataModel was read or changed from inside a mutation of it"),
            "\(crashed.standardError)")

        let survived = try await MirrorWorkerRun.run(["overlapping-read", "pending"])
        #expect(survived.status == 0, "\(survived.standardError)")
        #expect(survived.standardOutput.contains("survived 1"))
    }
}
