import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// The contract of `Mirror.observe(_:)`: the current records at once, then coalesced
/// snapshots, and no call when the records did not change.
@Suite(.timeLimit(.minutes(5))) struct MirrorObserveContractTests {
    @Test func theFirstCallIsMadeBeforeObserveReturns() async throws {
        let database = InMemoryDatabase()
        let milk = SampleRecord(title: "Milk")
        try await database.simulateSave(milk)
        let mirror = try await Mirror<SampleRecord>(database: database)
        let calls = Mutex<[[SampleRecord]]>([])

        let observation = mirror.observe { records in calls.withLock { $0.append(records) } }
        defer { observation.cancel() }

        #expect(calls.withLock { $0 } == [[milk]])
    }

    /// A local change wakes the observer twice — when it is made and when its commit
    /// confirms it — but the records changed once, so the handler is called once.
    @Test func aCommitThatChangesNothingMakesNoCall() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<SampleRecord>(database: database)
        let calls = AsyncCollector<[SampleRecord]>()
        let observation = mirror.observe { calls.append($0) }
        defer { observation.cancel() }

        database.commitLatency = .seconds(3600)
        let milk = SampleRecord(title: "Milk")
        mirror.dataModel.append(milk)
        try await calls.wait("the appended record") { $0.last == [milk] }
        // The commit was held back until now: it only confirms what the observer got.
        database.commitLatency = .zero
        try await mirror.waitUntilCommitted(timeout: .seconds(120))

        // A later change shows that the handler ran for nothing else in between.
        let bread = SampleRecord(title: "Bread")
        mirror.dataModel.append(bread)
        try await calls.wait("the second record") { $0.last == [milk, bread] }
        #expect(calls.items == [[], [milk], [milk, bread]])
    }

    @Test func aRemoteChangeIsDeliveredOnceAsASnapshot() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<SampleRecord>(database: database)
        let calls = AsyncCollector<[SampleRecord]>()
        let observation = mirror.observe { calls.append($0) }
        defer { observation.cancel() }

        let eggs = SampleRecord(title: "Eggs")
        try await database.simulateSave(eggs, by: "phone")
        try await calls.wait("the remote record") { $0.last == [eggs] }
        let bread = SampleRecord(title: "Bread")
        mirror.dataModel.append(bread)
        try await calls.wait("the local record") { $0.last == [eggs, bread] }
        // Every call differs from the one before it.
        #expect(zip(calls.items, calls.items.dropFirst()).allSatisfy { $0 != $1 })
    }
}
