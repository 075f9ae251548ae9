import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// The doubles drive a real `Mirror` through its retry, pending-change, error-notification
/// and remote-change paths, deterministically.
///
/// The documented semantics checked here (see `Mirror`): a change that fails transiently
/// stays pending and is retried with backoff; every failed attempt is reported exactly once,
/// as one `.mirrorError` notification; a failure retrying cannot fix puts the change on hold
/// until `flush()`.
@Suite(.timeLimit(.minutes(5))) struct MirrorFaultInjectionTests {
    let zone = ZoneID.public(SampleRecord.recordType)

    @Test func failedCommitsAreRetriedAndTheChangeStaysPendingUntilOneSucceeds() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let record = SampleRecord(title: "Retried")
        let id = record.recordID
        // What the mirror shows at each failure, read while its notification is posted:
        // after the failure was taken in and before the next attempt starts.
        let pendingAtEachFailure = Mutex<[[PendingChange]]>([])
        let recorder = ErrorNotificationRecorder { error in
            guard error.recordIDs.contains(id) else { return false }
            pendingAtEachFailure.withLock { $0.append(mirror.pendingChanges) }
            return true
        }
        database.failNextCommits(3, with: .diskFull)
        mirror.dataModel.append(record)
        // Applied to the array at once, and pending.
        #expect(mirror.dataModel.array == [record])
        #expect(mirror.pendingChanges.map(\.recordID) == [id])

        try await mirror.waitUntilCommitted(timeout: .seconds(120))

        let log = database.commitLog
        #expect(log.map(\.isFailed) == [true, true, true, false], "\(log)")
        #expect(log.compactMap(\.error?.kind) == [.diskFull, .diskFull, .diskFull])
        #expect(log.last?.isApplied == true)
        #expect(log.allSatisfy { $0.recordIDs == [id] && $0.writer == database.writerID && !$0.isSimulated })
        // Exactly one notification per failed attempt, each naming the record.
        #expect(recorder.count == 3)
        #expect(recorder.errors.map(\.kind) == [.diskFull, .diskFull, .diskFull])
        #expect(recorder.errors.allSatisfy { $0.recordType == SampleRecord.recordType && $0.scope == .public })
        // Pending at every failure, one more failed attempt each time, never on hold.
        let seen = pendingAtEachFailure.withLock { $0 }
        #expect(seen.map { $0.map(\.recordID) } == [[id], [id], [id]])
        #expect(seen.map { $0.first?.failedAttempts } == [1, 2, 3])
        #expect(seen.allSatisfy { $0.first?.lastError?.kind == .diskFull && $0.first?.isOnHold == false })
        // Stored once; the last error stays as a record of what happened.
        #expect(try database.records(SampleRecord.self) == [record])
        #expect(database.storedRecord(id, in: zone)?.version == 1)
        #expect(mirror.lastError?.kind == .diskFull)
    }

    @Test func oneFailedCommitPostsExactlyOneErrorNotification() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let first = SampleRecord(title: "Fails once")
        let second = SampleRecord(title: "Committed after")
        let recorder = errorRecorder(naming: first.recordID, second.recordID)
        database.failNextCommits(1, with: .ioFailure)
        mirror.dataModel.append(first)
        try await mirror.waitUntilCommitted(timeout: .seconds(120))
        #expect(recorder.count == 1)
        // Anything posted late for that failure would come before this later commit ends.
        mirror.dataModel.append(second)
        try await mirror.waitUntilCommitted(timeout: .seconds(120))
        #expect(recorder.count == 1)
        #expect(recorder.errors.first?.kind == .ioFailure)
        #expect(recorder.errors.first?.recordIDs == [first.recordID])
        #expect(database.commitLog.filter(\.isFailed).count == 1)
        #expect(Set(try database.records(SampleRecord.self)) == [first, second])
    }

    @Test func aReadOnlyDatabaseKeepsTheChangePendingUntilItRecovers() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let record = SampleRecord(title: "Waiting for write access")
        let id = record.recordID
        let recorder = errorRecorder(naming: id)
        database.availability = .readOnly
        mirror.dataModel.append(record)

        let error = try await mirror.waitForLastError(timeout: .seconds(120)) { $0.kind == .readOnly }
        #expect(error.recordIDs.contains(id))
        #expect(error.message.contains("read-only"))
        #expect(mirror.pendingChanges.map(\.recordID) == [id])
        #expect(mirror.dataModel.array == [record])
        #expect(database.storedRecords(in: zone).isEmpty)

        database.availability = .available
        try await mirror.waitUntilCommitted(timeout: .seconds(120))
        #expect(try database.records(SampleRecord.self) == [record])
        let log = database.commitLog
        let failed = log.filter(\.isFailed)
        #expect(!failed.isEmpty)
        #expect(failed.allSatisfy { $0.error?.kind == .readOnly })
        #expect(log.last?.isApplied == true)
        #expect(log.filter(\.isApplied).count == 1)
        // One notification per failed attempt, however many there were.
        #expect(recorder.count == failed.count)
        #expect(recorder.errors.allSatisfy { $0.kind == .readOnly })
    }

    @Test func anUnavailableDatabaseHoldsBackRemoteChangesUntilItRecovers() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        database.availability = .unavailable
        let record = SampleRecord(title: "Written while unreachable")
        // Simulated writers ignore this instance's faults; its notification reaches the
        // mirror, whose pull then fails.
        try await database.simulateSave(record)
        let error = try await mirror.waitForLastError(timeout: .seconds(120)) { $0.kind == .unavailable }
        #expect(error.recordType == SampleRecord.recordType)
        #expect(mirror.dataModel.isEmpty)
        database.availability = .available
        try await mirror.waitUntil(timeout: .seconds(120), "the record written meanwhile") { $0.array == [record] }
    }

    @Test func aPermanentFailureHoldsTheChangeUntilFlush() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let record = SampleRecord(title: "Refused once")
        let recorder = errorRecorder(naming: record.recordID)
        database.failNextCommits(1, with: .invalidRecord)
        mirror.dataModel.append(record)
        let pending = try await mirror.waitUntilPendingChanges(timeout: .seconds(120)) { $0.first?.isOnHold == true }
        #expect(pending.first?.failedAttempts == 1)
        #expect(pending.first?.lastError?.kind == .invalidRecord)
        #expect(recorder.count == 1)
        #expect(database.commitLog.map(\.isFailed) == [true])
        try await mirror.flush()
        #expect(database.commitLog.map(\.isFailed) == [true, false])
        #expect(try database.records(SampleRecord.self) == [record])
        #expect(recorder.count == 1)
    }

    @Test func latencyKeepsTheChangePendingWhileItsCommitIsInFlight() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let record = SampleRecord(title: "Slow")
        let id = record.recordID
        database.commitLatency = .seconds(3600)
        mirror.dataModel.append(record)
        try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(120), "the commit to start") { $0 == 1 }

        let pending = mirror.pendingChanges
        #expect(pending.map(\.recordID) == [id])
        #expect(pending.first?.isCommitting == true)
        #expect(mirror.hasPendingChanges)
        #expect(mirror.dataModel.array == [record])
        #expect(database.storedRecords(in: zone).isEmpty)
        #expect(database.commitLog.isEmpty)
        // A change made while the commit is in flight waits for it, then goes too.
        mirror.dataModel[0].title = "Edited while in flight"
        #expect(mirror.pendingChanges.contains { $0.recordID == id && !$0.isCommitting })

        database.commitLatency = .zero
        try await mirror.waitUntilCommitted(timeout: .seconds(120))
        #expect(try database.records(SampleRecord.self).map(\.title) == ["Edited while in flight"])
        #expect(database.commitLog.map(\.isApplied) == [true, true])
        #expect(database.storedRecord(id, in: zone)?.version == 2)
    }

    @Test func aSimulatedWritersChangesArriveAsRemoteChanges() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        let record = SampleRecord(title: "From elsewhere")
        let id = record.recordID

        var changes = mirror.changes()
        try await database.simulateSave(record, by: "phone")
        let inserted = try await changes.waitUntil(timeout: .seconds(120)) { $0.recordID == id }
        #expect(inserted == MirrorChange(kind: .inserted, recordID: id, record: record, origin: .remote, state: .committed))
        #expect(mirror.dataModel.array == [record])

        var edited = record
        edited.title = "Edited elsewhere"
        edited.isDone = true
        changes = mirror.changes()
        try await database.simulateSave(edited, by: "phone")
        let updated = try await changes.waitUntil(timeout: .seconds(120)) { $0.recordID == id }
        #expect(updated == MirrorChange(kind: .updated, recordID: id, record: edited, origin: .remote, state: .committed))
        #expect(mirror.dataModel.array == [edited])

        changes = mirror.changes()
        try await database.simulateDelete(edited, by: "phone")
        let removed = try await changes.waitUntil(timeout: .seconds(120)) { $0.recordID == id }
        #expect(removed == MirrorChange(kind: .removed, recordID: id, record: nil, origin: .remote, state: .committed))
        #expect(mirror.dataModel.isEmpty)

        // A remote change is never pending, and the mirror does not write it back.
        #expect(mirror.pendingChanges.isEmpty)
        #expect(database.commitLog.count == 3)
        #expect(database.commitLog.allSatisfy { $0.isSimulated && $0.writer == "phone" })
    }

    @Test func aSimulatedSaveStoresTheBytesAMirrorStores() async throws {
        let database = InMemoryDatabase()
        let mirror = try await sampleMirror(on: database)
        var record = SampleRecord(title: "Bytes", isDone: true, priority: 7, note: "é ✓ \"quoted\"")
        record.created = Date(timeIntervalSinceReferenceDate: 12_345.5)
        mirror.dataModel.append(record)
        try await mirror.waitUntilCommitted(timeout: .seconds(120))
        let byMirror = try #require(database.storedRecord(record.recordID, in: zone)?.fields)

        let other = InMemoryDatabase()
        let bySimulation = try #require(try await other.simulateSave(record).fields)
        #expect(byMirror == bySimulation, "\(String(decoding: byMirror, as: UTF8.self))")
        #expect(try other.records(SampleRecord.self) == [record])
    }
}
