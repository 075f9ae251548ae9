import Foundation
@testable import MagicMirror
import Observation
import Synchronization
import Testing

/// The Observation framework, the closure API, and the mirror's lifetime.
@Suite(.timeLimit(.minutes(5))) struct MirrorObservationTests {
    /// Tracks `dataModel` once and returns a collector that gets a value when it changes.
    private func track(_ mirror: Mirror<Chore>) -> AsyncCollector<Bool> {
        let fired = AsyncCollector<Bool>()
        withObservationTracking {
            _ = mirror.dataModel
        } onChange: {
            fired.append(true)
        }
        return fired
    }

    @Test(arguments: DatabaseFactory.all)
    func observationTrackingFiresOnLocalAndRemoteChanges(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)

        let local = track(mirror)
        mirror.dataModel.append(Chore(title: "local"))
        try await local.wait(forCount: 1, "the local change to fire")

        let edit = track(mirror)
        mirror.dataModel[0].done = true
        try await edit.wait(forCount: 1, "the edit to fire")

        try await mirror.flush()
        let remote = track(mirror)
        try await seed([Chore(title: "remote")], into: try await opened.otherWriter())
        try await remote.wait(forCount: 1, "the remote change to fire")
        try await waitUntil(mirror, "the remote chore") { $0.count == 2 }
    }

    @Test(arguments: DatabaseFactory.all)
    func observationTrackingFiresWhenAnErrorIsReported(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: database, configuration: quickRetries)
        let fired = AsyncCollector<Bool>()
        withObservationTracking {
            _ = mirror.lastError
        } onChange: {
            fired.append(true)
        }
        database.failNextCommits(1, with: .unavailable)
        mirror.dataModel.append(Chore(title: "fails once"))
        try await fired.wait(forCount: 1, "lastError to fire")
        #expect(mirror.lastError?.kind == .unavailable)
    }

    @Test(arguments: DatabaseFactory.all)
    func observeDeliversTheCurrentValueFirstThenChanges(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let first = Chore(id: "a", title: "first")
        try await seed([first], into: opened.database)
        let mirror = try await Mirror<Chore>(database: opened.database)
        let values = AsyncCollector<[Chore]>()

        let observation = mirror.observe { values.append($0) }
        try await values.wait(forCount: 1, "the current value")
        #expect(values.items.first == [first])

        let second = Chore(id: "b", title: "second")
        mirror.dataModel.append(second)
        try await values.wait("the appended value") { $0.last == [first, second] }
        try await seed([Chore(id: "c", title: "remote")], into: try await opened.otherWriter())
        try await values.wait("the remote value") { $0.last?.count == 3 }

        // After cancel, changes are not delivered.
        observation.cancel()
        mirror.dataModel.removeAll()
        try await mirror.flush()
        let probe = AsyncCollector<[Chore]>()
        let later = mirror.observe { probe.append($0) }
        try await probe.wait("an observer that sees the removal") { $0.last?.isEmpty == true }
        later.cancel()
        #expect(!values.items.contains { $0.isEmpty })
    }

    @Test(arguments: DatabaseFactory.all)
    func anObservationEndsWhenItsCancellableIsReleased(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)
        let values = AsyncCollector<[Chore]>()
        var observation: MirrorCancellable? = mirror.observe { values.append($0) }
        try await values.wait(forCount: 1, "the current value")
        _ = observation
        observation = nil

        mirror.dataModel.append(Chore(title: "unseen"))
        try await mirror.flush()
        let probe = AsyncCollector<[Chore]>()
        let later = mirror.observe { probe.append($0) }
        try await probe.wait("the change") { $0.last?.count == 1 }
        later.cancel()
        #expect(!values.items.contains { $0.count == 1 })
    }

    @Test(arguments: DatabaseFactory.all)
    func aMirrorThatGoesAwayStopsItsWorkAndReleasesEverything(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        var mirror: Mirror<Chore>? = try await Mirror<Chore>(database: database)
        let weak = WeakBox(mirror!)
        let changes = AsyncCollector(mirror!.changes())
        let errors = AsyncCollector(mirror!.errors())
        let values = AsyncCollector<[Chore]>()
        let observation = mirror!.observe { values.append($0) }
        try await values.wait(forCount: 1, "the first value")
        mirror!.dataModel.append(Chore(title: "committed first"))
        try await mirror!.flush()
        #expect(database.liveSubscriptions == 1)

        mirror = nil

        try await changes.waitForEnd("the change stream to end")
        try await errors.waitForEnd("the error stream to end")
        #expect(weak.object == nil)
        #expect(database.liveSubscriptions == 0)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: .public("Chore")).members == 0)
        observation.cancel()
    }

    @Test(arguments: DatabaseFactory.all)
    func readingFromManyThreadsWhileMutatingIsSafe(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for number in 0..<50 {
                        mirror.dataModel.append(Chore(id: "w\(writer)-\(number)", title: "\(number)"))
                        let count = mirror.dataModel.count
                        mirror.dataModel[count - 1].rank += 1
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<200 {
                        let model = mirror.dataModel
                        #expect(Set(model.map(\.id)).count == model.count)
                    }
                }
            }
        }
        try await mirror.flush()
        #expect(mirror.dataModel.count == 200)
        #expect(mirror.dataModel.map(\.rank).reduce(0, +) == 200)
        #expect(try await storedRecords(Chore.self, in: opened.database).count == 200)
    }
}
