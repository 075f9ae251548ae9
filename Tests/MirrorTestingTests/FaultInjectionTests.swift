import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct FaultInjectionTests {
    let zone = ZoneID.public("Todo")

    @Test func failNextCommitsFailsExactlyNThenSucceeds() async throws {
        let database = InMemoryDatabase()
        database.failNextCommits(3, with: .ioFailure)
        #expect(database.remainingCommitFailures == 3)
        for attempt in 1...3 {
            do {
                try await database.commit([newRecord("a"), newRecord("b")], to: zone)
                Issue.record("commit \(attempt) succeeded")
            } catch let error as MirrorError {
                #expect(error.kind == .ioFailure)
                #expect(error.recordIDs == ["a", "b"])
                #expect(error.recordType == "Todo")
                #expect(error.scope == .public)
                #expect(error.message.contains("injected failure \(attempt) of 3"), "\(error.message)")
            }
            #expect(database.remainingCommitFailures == 3 - attempt)
        }
        // A failed commit stores nothing.
        #expect(try await database.fetchAll(in: zone).records.isEmpty)
        #expect(try await database.currentToken(in: zone) == .initial)
        let outcome = try await database.commit([newRecord("a"), newRecord("b")], to: zone)
        #expect(outcome.isApplied)
        #expect(try await database.fetchAll(in: zone).records.count == 2)
        let log = database.commitLog
        #expect(log.map(\.isFailed) == [true, true, true, false])
        #expect(log.last?.isApplied == true)
        #expect(log.compactMap(\.error?.kind) == [.ioFailure, .ioFailure, .ioFailure])
    }

    @Test func concurrentCommitsFailExactlyN() async throws {
        let database = InMemoryDatabase()
        database.failNextCommits(5, with: .diskFull)
        let failures = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<40 {
                group.addTask {
                    do {
                        try await database.commit([newRecord("r\(index)")], to: zone)
                        return false
                    } catch {
                        return true
                    }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(failures == 5)
        #expect(try await database.fetchAll(in: zone).records.count == 35)
        #expect(database.remainingCommitFailures == 0)
    }

    @Test func queuedFailuresAreUsedInOrderAndCanTargetOneZone() async throws {
        let database = InMemoryDatabase()
        let other = ZoneID.public("Note")
        database.failNextCommits(1, with: .ioFailure, in: zone)
        database.failNextCommits(2, with: .diskFull)
        // The first queued failure is for `zone` only, so a commit elsewhere skips it.
        await expectError(.diskFull) { try await database.commit([newRecord("n1")], to: other) }
        await expectError(.ioFailure) { try await database.commit([newRecord("t1")], to: zone) }
        await expectError(.diskFull) { try await database.commit([newRecord("t1")], to: zone) }
        try await database.commit([newRecord("t1")], to: zone)
        try await database.commit([newRecord("n1")], to: other)
        #expect(database.remainingCommitFailures == 0)
    }

    @Test func readOnlyFailsCommitsButNotReadsUntilItRecovers() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("kept")], to: zone)
        database.availability = .readOnly
        do {
            try await database.commit([newRecord("new")], to: zone)
            Issue.record("a read-only database accepted a commit")
        } catch let error as MirrorError {
            #expect(error.kind == .readOnly)
            #expect(error.recordIDs == ["new"])
            #expect(error.message.contains("read-only"))
        }
        #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["kept"])
        #expect(try await database.fetch(["kept"], in: zone).count == 1)
        database.availability = .available
        try await database.commit([newRecord("new")], to: zone)
        #expect(Set(try await database.fetchAll(in: zone).records.map(\.id)) == ["kept", "new"])
    }

    @Test func unavailableFailsReadsAndCommitsWithoutUsingUpQueuedFailures() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("kept")], to: zone)
        database.failNextCommits(1, with: .ioFailure)
        database.availability = .unavailable
        #expect(database.availability == .unavailable)
        await expectError(.unavailable) { try await database.commit([newRecord("x")], to: zone) }
        await expectError(.unavailable) { try await database.fetchAll(in: zone) }
        await expectError(.unavailable) { try await database.fetch(["kept"], in: zone) }
        await expectError(.unavailable) { try await database.changes(in: zone, since: .initial) }
        await expectError(.unavailable) { try await database.currentToken(in: zone) }
        #expect(database.remainingCommitFailures == 1)
        // Subscribing still works.
        let subscription = try database.subscribe(to: zone) { _ in }
        subscription.cancel()
        database.availability = .available
        await expectError(.ioFailure) { try await database.commit([newRecord("x")], to: zone) }
        try await database.commit([newRecord("x")], to: zone)
        #expect(try await database.fetchAll(in: zone).records.count == 2)
    }

    @Test func failNextReadsFailsExactlyNReads() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("a")], to: zone)
        database.failNextReads(2, with: .ioFailure)
        #expect(database.remainingReadFailures == 2)
        #expect(database.remainingCommitFailures == 0)
        do {
            _ = try await database.fetch(["a"], in: zone)
            Issue.record("the read succeeded")
        } catch let error as MirrorError {
            #expect(error.kind == .ioFailure)
            #expect(error.recordIDs == ["a"])
            #expect(error.recordType == "Todo")
        }
        // Commits are not reads.
        try await database.commit([newRecord("b")], to: zone)
        await expectError(.ioFailure) { try await database.changes(in: zone, since: .initial) }
        #expect(try await database.fetchAll(in: zone).records.count == 2)
        #expect(database.remainingReadFailures == 0)
    }

    @Test func faultsBelongToOneInstance() async throws {
        let database = InMemoryDatabase()
        let other = database.writer(named: "other")
        let heard = NotificationLog()
        let subscription = try database.subscribe(to: zone, handler: heard.handler)
        defer { subscription.cancel() }
        database.availability = .unavailable
        database.failNextCommits(3, with: .ioFailure)
        try await other.commit([newRecord("by-other")], to: zone)
        try await database.simulateSave(id: "simulated", fields: fields(["v": 1]), in: zone)
        #expect(other.availability == .available)
        #expect(other.remainingCommitFailures == 0)
        // Notifications reach the failing instance's subscription all the same.
        #expect(heard.all.map(\.recordIDs) == [["by-other"], ["simulated"]])
        #expect(database.storedRecords(in: zone).map(\.id) == ["by-other", "simulated"])
    }

    @Test func aCommitWithLatencyIsInFlightWhileOtherWritersCommit() async throws {
        let database = InMemoryDatabase()
        let other = database.writer(named: "other")
        database.commitLatency = .seconds(3600)
        #expect(database.commitLatency == .seconds(3600))
        let slow = Task { try await database.commit([newRecord("slow")], to: zone) }
        // Another writer's commit (and this instance's own reads) complete meanwhile.
        try await other.commit([newRecord("fast")], to: zone)
        #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["fast"])
        #expect(database.commitLog.map(\.recordIDs) == [["fast"]])
        // Cancelling the committing task ends the wait; the commit stores nothing.
        slow.cancel()
        let ended = await expectError(.cancelled) { try await result(of: slow).get() }
        #expect(ended?.message.contains("latency") == true)
        #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["fast"])
        #expect(database.commitLog.last?.error?.kind == .cancelled)
        #expect(database.commitLog.last?.recordIDs == ["slow"])
    }

    @Test func aCommitWithShortLatencyCompletes() async throws {
        let database = InMemoryDatabase()
        database.commitLatency = .milliseconds(20)
        database.readLatency = .milliseconds(20)
        try await database.commit([newRecord("a")], to: zone)
        #expect(try await database.fetchAll(in: zone).records.map(\.id) == ["a"])
    }

    @Test func aReadWithLatencyIsInFlightWhileACommitCompletes() async throws {
        let database = InMemoryDatabase()
        database.readLatency = .seconds(3600)
        let slowRead = Task { try await database.fetchAll(in: zone) }
        // Commits have no latency: this one completes while the read waits.
        try await database.commit([newRecord("a")], to: zone)
        #expect(database.storedRecords(in: zone).map(\.id) == ["a"])
        slowRead.cancel()
        await expectError(.cancelled) { try await result(of: slowRead).get() }
    }

    @Test func aNewLatencyAppliesToTheCommitsAlreadyWaiting() async throws {
        let database = InMemoryDatabase()
        database.commitLatency = .seconds(3600)
        let slow = Task { try await database.commit([newRecord("slow")], to: zone) }
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        #expect(database.commitLog.isEmpty)
        // Still far from its start plus one second less than an hour: it keeps waiting.
        database.commitLatency = .seconds(3599)
        #expect(database.commitsInProgress == 1)
        database.commitLatency = .zero
        let outcome = try await result(of: slow).get()
        #expect(outcome.isApplied)
        #expect(database.commitsInProgress == 0)
        #expect(database.commitLog.map(\.isApplied) == [true])
    }

    @Test func aNewReadLatencyAppliesToTheReadsAlreadyWaiting() async throws {
        let database = InMemoryDatabase()
        try await database.commit([newRecord("a")], to: zone)
        database.readLatency = .seconds(3600)
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let slowRead = Task {
            signal.yield()
            return try await database.fetchAll(in: zone)
        }
        try await started.waitUntil(timeout: .seconds(120)) { true }
        database.readLatency = .zero
        #expect(try await result(of: slowRead).get().records.map(\.id) == ["a"])
    }

    @Test func removeAllFaultsReleasesTheCommitsWaitingOutTheirLatency() async throws {
        let database = InMemoryDatabase()
        database.commitLatency = .seconds(3600)
        let slow = Task { try await database.commit([newRecord("slow")], to: zone) }
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120)) { $0 == 1 }
        database.removeAllFaults()
        #expect(try await result(of: slow).get().isApplied)
    }

    @Test func commitsInProgressCountsEveryStartAndEndInOrder() async throws {
        let database = InMemoryDatabase()
        let other = database.writer(named: "other")
        let updates = database.commitsInProgressUpdates
        let seen = Task {
            var values: [Int] = []
            for await value in updates {
                values.append(value)
                if values.count == 5 { break }
            }
            return values
        }
        database.commitLatency = .seconds(3600)
        other.commitLatency = .seconds(3600)
        let first = Task { try await database.commit([newRecord("a")], to: zone) }
        let second = Task { try await other.commit([newRecord("b")], to: zone) }
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120)) { $0 == 2 }
        #expect(database.commitsInProgress == 2)
        #expect(other.commitsInProgress == 2)
        database.commitLatency = .zero
        other.commitLatency = .zero
        _ = try await result(of: first).get()
        _ = try await result(of: second).get()
        #expect(try await value(of: seen) == [0, 1, 2, 1, 0])
        #expect(database.commitsInProgress == 0)
    }

    @Test func removeAllFaultsRestoresANormalDatabase() async throws {
        let database = InMemoryDatabase()
        database.failNextCommits(2, with: .ioFailure)
        database.failNextReads(2, with: .ioFailure)
        database.availability = .readOnly
        database.commitLatency = .seconds(3600)
        database.readLatency = .seconds(3600)
        database.removeAllFaults()
        #expect(database.availability == .available)
        #expect(database.commitLatency == .zero)
        #expect(database.readLatency == .zero)
        #expect(database.remainingCommitFailures == 0)
        #expect(database.remainingReadFailures == 0)
        try await database.commit([newRecord("a")], to: zone)
        #expect(try await database.fetchAll(in: zone).records.count == 1)
    }

    @Test func aZeroOrNegativeCountQueuesNothing() async throws {
        let database = InMemoryDatabase()
        database.failNextCommits(0, with: .ioFailure)
        database.failNextCommits(-3, with: .ioFailure)
        database.failNextReads(0, with: .ioFailure)
        #expect(database.remainingCommitFailures == 0)
        #expect(database.remainingReadFailures == 0)
        try await database.commit([newRecord("a")], to: zone)
    }
}
