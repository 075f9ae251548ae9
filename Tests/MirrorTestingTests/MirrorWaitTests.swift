import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5))) struct MirrorWaitTests {
    private struct Boom: Error, CustomStringConvertible {
        var description: String { "boom" }
    }

    @Test func returnsAtOnceWhenTheRecordsAlreadySatisfyTheCondition() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        mirror.dataModel.append(contentsOf: SampleRecord.many(3))
        let records = try await mirror.waitUntil(timeout: .seconds(120)) { $0.count == 3 }
        #expect(records.map(\.title) == ["Sample 0", "Sample 1", "Sample 2"])
    }

    @Test func waitsForAnotherWritersChangeToArrive() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let eggs = SampleRecord(title: "Eggs")
        // Made by another task while the wait is under way.
        let writer = Task {
            try await database.writer(named: "other-process").simulateSave(eggs)
        }
        let records = try await mirror.waitUntil(timeout: .seconds(120), "the other writer's record") {
            $0.contains { $0.title == "Eggs" }
        }
        #expect(records.array == [eggs])
        _ = try await result(of: writer).get()
    }

    @Test func waitsForLocalChangesMadeMeanwhile() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let waiter = Task { try await mirror.waitUntil(timeout: .seconds(120)) { $0.count == 2 } }
        let appender = Task.detached {
            mirror.dataModel.append(SampleRecord(title: "one"))
            mirror.dataModel.append(SampleRecord(title: "two"))
        }
        await appender.value
        let records = try await result(of: waiter).get()
        #expect(records.map(\.title) == ["one", "two"])
    }

    @Test func aTimeoutShowsTheRecordsLastSeen() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        mirror.dataModel.append(SampleRecord(title: "Milk"))
        mirror.dataModel.append(SampleRecord(title: "Bread"))
        let error = await expectError(.timedOut) {
            try await mirror.waitUntil(timeout: .milliseconds(50), "three groceries") { $0.count == 3 }
        }
        let message = error?.message ?? ""
        #expect(message.contains("timed out after"), "\(message)")
        #expect(message.contains("for three groceries"), "\(message)")
        #expect(message.contains("2 records: ["), "\(message)")
        #expect(message.contains(#"SampleRecord("Milk""#), "\(message)")
        #expect(message.contains(#"SampleRecord("Bread""#), "\(message)")
    }

    @Test func aTimeoutAbbreviatesManyRecords() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        mirror.dataModel.append(contentsOf: SampleRecord.many(25, titled: "Item"))
        let long = String(repeating: "x", count: 1000)
        mirror.dataModel[0].note = long
        let error = await expectError(.timedOut) {
            try await mirror.waitUntil(timeout: .milliseconds(50)) { $0.isEmpty }
        }
        let message = error?.message ?? ""
        #expect(message.contains("the records of public/SampleRecord to satisfy the condition"), "\(message)")
        #expect(message.contains("25 records: ["), "\(message)")
        #expect(message.contains(#""Item 9""#), "\(message)")
        #expect(!message.contains(#""Item 10""#), "\(message)")
        #expect(message.contains("and 15 more]"), "\(message)")
        // A long record is cut short.
        #expect(!message.contains(long), "\(message.count) characters")
        #expect(message.count < 4000, "\(message.count) characters")
    }

    @Test func aConditionThatThrowsEndsTheWait() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let error = await expectError(.timedOut) {
            try await mirror.waitUntil(timeout: .seconds(3600)) { _ in throw Boom() }
        }
        #expect(error?.message.contains("the condition threw boom") == true)
        #expect(error?.underlying is Boom)
    }

    @Test func cancellingTheWaitingTaskEndsTheWait() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let waiter = Task { try await mirror.waitUntil(timeout: .seconds(3600)) { $0.count == 1_000 } }
        waiter.cancel()
        await expectError(.cancelled) { try await result(of: waiter).get() }
    }

    @Test func waitUntilCommittedReturnsOnceEveryChangeIsStored() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        // Not committed before the wait: the commit is held back by the latency.
        database.commitLatency = .seconds(3600)
        let records = SampleRecord.many(3)
        mirror.dataModel.append(contentsOf: records)
        #expect(mirror.pendingChanges.count == 3)
        let waiter = Task { try await mirror.waitUntilCommitted(timeout: .seconds(120)) }
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        database.commitLatency = .zero
        try await result(of: waiter).get()
        #expect(mirror.pendingChanges.isEmpty)
        #expect(Set(try database.records(SampleRecord.self)) == Set(records))
    }

    /// The flake of `aFullDiskDelaysAnItemButDoesNotLoseIt` in full runs: the retry was
    /// committed, but the task reading the state had not run since (the cooperative pool was
    /// busy for longer than the time-out), so the wait reported the failed attempt it had
    /// seen. Here the reading task is held up inside the condition until the time-out has
    /// ended the wait and the change is committed.
    @Test func aStepTheReaderHasNotSeenWhenTheTimeIsUpStillCounts() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        database.commitLatency = .seconds(3600)
        mirror.dataModel.append(SampleRecord(title: "Milk"))
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        let heldUp = Mutex(false)
        try await mirror.waitUntilPendingChanges(timeout: .milliseconds(50)) { changes in
            guard !changes.isEmpty else { return true }
            guard !heldUp.withLock({ $0 }) else { return false }
            heldUp.withLock { $0 = true }
            database.commitLatency = .zero
            // The time-out cancels the reading task; the commit goes on meanwhile. Polled:
            // the condition runs synchronously on the reading task, which is the point.
            let limit = ContinuousClock.now + .seconds(60)
            while !(Task.isCancelled && mirror.pendingChanges.isEmpty), ContinuousClock.now < limit {
                Thread.sleep(forTimeInterval: 0.005)
            }
            return false
        }
        #expect(heldUp.withLock { $0 })
        #expect(mirror.pendingChanges.isEmpty)
    }

    @Test func waitUntilCommittedTimesOutListingTheChangesOnHold() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        database.failNextCommits(1, with: .invalidRecord)
        let record = SampleRecord(title: "Refused")
        mirror.dataModel.append(record)
        try await mirror.waitUntilPendingChanges(timeout: .seconds(120)) { $0.first?.isOnHold == true }
        let error = await expectError(.timedOut) { try await mirror.waitUntilCommitted(timeout: .milliseconds(50)) }
        let message = error?.message ?? ""
        #expect(message.contains("every change to public/SampleRecord to be committed"), "\(message)")
        #expect(message.contains("1 pending change: [save \(record.recordID) (1 failed attempt) on hold"), "\(message)")
        #expect(message.contains("last error: invalidRecord: "), "\(message)")
        // Only watching: the change is still on hold; flush() is what tries it again.
        #expect(mirror.pendingChanges.first?.isOnHold == true)
        try await mirror.flush()
        #expect(try database.records(SampleRecord.self) == [record])
    }

    @Test func waitUntilPendingChangesSeesEachFailedAttempt() async throws {
        let database = InMemoryDatabase()
        // A long retry delay: the change stays failed until the test looks.
        let mirror = try await sampleMirror(
            on: database, configuration: MirrorConfiguration(retryDelay: .seconds(3600)))
        database.failNextCommits(1, with: .diskFull)
        let record = SampleRecord()
        mirror.dataModel.append(record)
        let pending = try await mirror.waitUntilPendingChanges(timeout: .seconds(120)) {
            $0.first?.failedAttempts == 1
        }
        #expect(pending.map(\.recordID) == [record.recordID])
        #expect(pending.first?.lastError?.kind == .diskFull)
        #expect(pending.first?.isOnHold == false)
        try await mirror.flush()
        #expect(mirror.pendingChanges.isEmpty)
    }

    @Test func waitForLastErrorSeesAFailureThatHappenedBeforeTheWait() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(
            on: database, configuration: MirrorConfiguration(retryDelay: .seconds(3600)))
        database.failNextCommits(1, with: .ioFailure)
        mirror.dataModel.append(SampleRecord())
        try await mirror.waitUntilPendingChanges(timeout: .seconds(120)) { $0.first?.failedAttempts == 1 }
        // The failure is over; the wait still sees it, as state.
        let error = try await mirror.waitForLastError(timeout: .seconds(120)) { $0.kind == .ioFailure }
        #expect(error.message.contains("injected failure 1 of 1"))
        let other = await expectError(.timedOut) {
            try await mirror.waitForLastError(timeout: .milliseconds(50), "a disk-full error") { $0.kind == .diskFull }
        }
        #expect(other?.message.contains("for a disk-full error") == true)
        #expect(other?.message.contains("ioFailure") == true)
    }

    @Test func waitForLastErrorWithoutAnErrorSaysSo() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let error = await expectError(.timedOut) { try await mirror.waitForLastError(timeout: .milliseconds(20)) }
        #expect(error?.message.contains("the last one: no error") == true, "\(error?.message ?? "")")
    }
}
