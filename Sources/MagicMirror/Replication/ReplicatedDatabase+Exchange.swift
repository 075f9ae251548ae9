import Foundation
import Synchronization

// The background exchange with the remote: push what waits in the replica, pull what the
// remote changed, settle conflicts, report failures once.

extension ReplicatedDatabase {
    /// The most local changes pushed in one remote commit.
    static let pushBatchSize = 100

    /// Starts the task that exchanges changes whenever something happens (a commit through
    /// this instance, a notification from the remote or from another process sharing the
    /// replica), and retries with backoff while the remote cannot be reached. It holds the
    /// database weakly between exchanges and ends with it.
    func startWorker() {
        let wakeup = self.wakeup
        let task = Task { [weak self] in
            while !Task.isCancelled {
                guard let deadline = await ReplicatedDatabase.runExchange(self) else { return }
                await wakeup.wait(until: deadline)
            }
        }
        worker.withLock { $0 = task }
    }

    /// Runs one exchange; returns when to try again (`.some(nil)`: when woken), or `nil`
    /// when the database is gone.
    private static func runExchange(_ database: ReplicatedDatabase?) async -> ContinuousClock.Instant?? {
        guard let database else { return nil }
        await database.exchangeGate.acquire()
        let failure = await database.exchange(retryingHeld: false)
        database.exchangeGate.release()
        guard failure != nil else { return .some(nil) }
        let failures = database.replication.withLock { $0.failures }
        return .some(.now + database.backoff.delay(afterFailures: failures))
    }

    /// Starts synchronising `zone` (once): subscribes to the replica's notifications, so
    /// that other processes' commits reach this instance's subscribers and get pushed.
    func activate(_ zone: ZoneID) {
        guard (try? zone.validate()) != nil else { return }
        let isNew = replication.withLock { state in
            guard state.zones[zone] == nil else { return false }
            state.zones[zone] = ReplicationState.Zone()
            return true
        }
        guard isNew else { return }
        let subscription = try? local.subscribe(to: zone) { [weak self] notification in
            self?.replicaChanged(notification)
        }
        replication.withLock { $0.zones[zone]?.replicaSubscription = subscription }
        wakeup.signal()
    }

    /// Another writer (another process sharing the replica) changed it: tell subscribers,
    /// and look for changes to push.
    private func replicaChanged(_ notification: RemoteNotification) {
        // This instance's own replica commits are announced where they are made.
        guard notification.writer != local.writerID else { return }
        var mapped = notification
        mapped.databaseIdentifier = identifier
        mapped.recordIDs.removeAll { $0 == Self.stateRecordID }
        if !mapped.recordIDs.isEmpty { subscribers.deliver([mapped]) }
        wakeup.signal()
    }

    /// One exchange over every zone in use: push, pull. Returns the failure that ended it.
    func exchange(retryingHeld: Bool) async -> MirrorError? {
        let zones = replication.withLock { state -> [ZoneID] in
            if retryingHeld {
                for zone in state.zones.keys { state.zones[zone]?.held = [:] }
            }
            if !state.zones.isEmpty, state.phase == .online { state.phase = .syncing }
            return state.zones.keys.sorted { $0.description < $1.description }
        }
        guard !zones.isEmpty else { return nil }
        publishStatus()
        var failure: MirrorError?
        for zone in zones {
            do throws(MirrorError) {
                try subscribeToRemote(zone)
                try await refreshWaiting(zone)
                try await push(zone)
                try await pull(zone)
                try await refreshWaiting(zone)
            } catch {
                failure = error.adding(recordType: zone.recordType, scope: zone.scope)
                break
            }
        }
        finishExchange(failure)
        return failure
    }

    private func finishExchange(_ failure: MirrorError?) {
        let post = replication.withLock { state -> MirrorError? in
            guard let failure else {
                state.failures = 0
                state.phase = .online
                state.lastSuccessfulSync = Date()
                // The next outage is a new problem.
                state.reported = state.reported.filter { !$0.hasPrefix("offline|") }
                return nil
            }
            state.failures += 1
            guard state.phase != .offline else { return nil }
            state.phase = .offline
            let problem = MirrorError(
                failure.kind,
                "the remote could not be reached (\(failure.message)); changes are kept in the replica "
                    + "and sent when it is back", recordType: failure.recordType, scope: failure.scope,
                underlying: failure)
            return state.record(problem, key: "offline|\(state.failures)") ? problem : nil
        }
        if let post { NotificationCenter.default.post(name: .mirrorError, object: post) }
        publishStatus()
    }

    private func subscribeToRemote(_ zone: ZoneID) throws(MirrorError) {
        guard replication.withLock({ $0.zones[zone]?.remoteSubscription == nil }) else { return }
        let wakeup = self.wakeup
        do {
            let subscription = try remote.subscribe(to: zone) { _ in wakeup.signal() }
            replication.withLock { $0.zones[zone]?.remoteSubscription = subscription }
        } catch {
            throw MirrorError.wrapping(error, "subscribing to the remote")
        }
    }

    // MARK: What waits

    /// Reads the replica's changes since the last look to learn which records have a local
    /// change waiting (made by any process sharing the replica).
    private func refreshWaiting(_ zone: ZoneID) async throws(MirrorError) {
        let since = replication.withLock { $0.zones[zone]?.replicaToken }
        let set: ChangeSet
        do {
            if let since { set = try await local.changes(in: zone, since: since) } else { set = try await local.fetchAll(in: zone) }
        } catch {
            throw MirrorError.wrapping(error, "reading the replica")
        }
        var found: [(String, HLCTimestamp?)] = []
        for record in set.records where record.id != Self.stateRecordID {
            found.append((record.id, envelope(of: record)?.local?.timestamp))
        }
        replication.withLock { state in
            if set.isComplete { state.zones[zone]?.waiting = [:] }
            state.note(found, in: zone)
            state.zones[zone]?.replicaToken = set.token
        }
        publishStatus()
    }

    /// Records what waits after this instance changed the replica.
    func noteWaiting(_ waiting: [(String, HLCTimestamp?)], in zone: ZoneID) {
        guard !waiting.isEmpty else { return }
        replication.withLock { $0.note(waiting, in: zone) }
        publishStatus()
    }

    // MARK: Push

    /// Pushes the waiting local changes of `zone`, oldest first, in batches; settles
    /// conflicts; holds what the remote refuses for good.
    private func push(_ zone: ZoneID) async throws(MirrorError) {
        var oneAtATime = false
        while true {
            let candidates = replication.withLock {
                $0.pushCandidates(in: zone, limit: oneAtATime ? 1 : Self.pushBatchSize)
            }
            guard !candidates.isEmpty else { return }
            let stored = try await replicaRecords(candidates, in: zone)
            var operations: [RecordOperation] = []
            var envelopes: [String: ReplicaEnvelope] = [:]
            var gone: [(String, HLCTimestamp?)] = []
            for id in candidates {
                guard let record = stored[id], let envelope = envelope(of: record), let operation = envelope.push(id)
                else {
                    gone.append((id, nil))
                    continue
                }
                envelopes[id] = envelope
                operations.append(operation)
            }
            noteWaiting(gone, in: zone)
            guard !operations.isEmpty else { continue }

            let outcome: CommitOutcome
            do {
                outcome = try await remote.commit(operations, to: zone)
            } catch {
                let failure = MirrorError.wrapping(error, "pushing local changes to the remote")
                    .adding(recordType: zone.recordType, scope: zone.scope)
                if failure.kind.isTransient || failure.kind == .cancelled { throw failure }
                // Refused for good: find the change to blame by pushing one at a time.
                if operations.count > 1 {
                    oneAtATime = true
                    continue
                }
                hold(operations[0], in: zone, failure, unsettled: false)
                continue
            }

            var updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?] = [:]
            let now = HybridLogicalClock.shared.now()
            let writer = writerID
            for (operation, result) in zip(operations, outcome.results) {
                let id = operation.recordID
                let pushedAt = operation.timestamp
                switch result {
                case .applied(let record):
                    updates[id] = { $0?.accepting(record, pushedAt: pushedAt) }
                case .conflict(let current):
                    if let current, current.modified == pushedAt, current.fields == operation.savedFields {
                        // Stored by an earlier push (this or another process): not again.
                        updates[id] = { $0?.accepting(current, pushedAt: pushedAt) }
                        continue
                    }
                    if let current { HybridLogicalClock.shared.observe(current.modified) }
                    let envelope = envelopes[id] ?? ReplicaEnvelope()
                    let conflict = PushConflict(
                        zone: zone, recordID: id, base: envelope.remote, localFields: envelope.local?.fields,
                        localTimestamp: pushedAt, current: current)
                    guard let resolution = settle(conflict) else {
                        hold(operation, in: zone, MirrorError(
                            .conflict,
                            "record \(id) changed on the remote since it was changed here, and no Mirror of "
                                + "record type \(zone.recordType) is open in this process to settle the conflict "
                                + "with its policy; the local change waits in the replica until one opens",
                            recordIDs: [id], recordType: zone.recordType, scope: zone.scope), unsettled: true)
                        continue
                    }
                    if case .hold(let error) = resolution {
                        hold(operation, in: zone, error, unsettled: false)
                        continue
                    }
                    updates[id] = {
                        $0?.settling(resolution, current: current, pushedAt: pushedAt, writer: writer, now: now)
                    }
                case .notApplied:
                    break   // pushed again in the next batch
                }
            }
            try await updateReplica(zone, updates)
        }
    }

    /// Holds a local change and reports it once.
    private func hold(_ operation: RecordOperation, in zone: ZoneID, _ error: MirrorError, unsettled: Bool) {
        let error = error.adding(recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
        replication.withLock { state in
            state.zones[zone]?.held[operation.recordID] = ReplicationState.Held(
                timestamp: operation.timestamp, error: error, unsettled: unsettled)
        }
        report(error, key: "held|\(zone)|\(operation.recordID)|\(operation.timestamp)|\(unsettled)")
        publishStatus()
    }

    // MARK: Pull

    /// Pulls the remote's changes since the replica's token into the replica, or the whole
    /// zone when the replica has none (new, deleted, another remote's) or its files had
    /// unreadable entries. Records with a local change waiting are left to the push, which
    /// meets the remote's change as a conflict.
    private func pull(_ zone: ZoneID) async throws(MirrorError) {
        let stateRecord = try await replicaRecords([Self.stateRecordID], in: zone)[Self.stateRecordID]
        let saved = stateRecord?.fields.flatMap { try? JSONDecoder().decode(ReplicaSyncState.self, from: $0) }
        let corruption = corruptEntries(in: zone)
        let rebuild = replication.withLock { corruption > ($0.zones[zone]?.corruptionSeen ?? 0) }
        let set: ChangeSet
        do {
            if let saved, saved.remote == remote.identifier, !rebuild {
                set = try await remote.changes(in: zone, since: saved.token)
            } else {
                set = try await remote.fetchAll(in: zone)
            }
        } catch {
            throw MirrorError.wrapping(error, "reading the remote's changes")
        }
        if let saved, !rebuild, !set.isComplete, set.records.isEmpty, set.token == saved.token { return }

        var updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?] = [:]
        let isComplete = set.isComplete
        for record in set.records where record.id != Self.stateRecordID {
            updates[record.id] = { envelope in
                guard envelope?.local == nil else { return nil }
                guard let envelope else { return record.isDeleted ? nil : ReplicaEnvelope().applyingRemote(record, id: record.id) }
                if let known = envelope.remote, known == record || (!isComplete && known.version > record.version) {
                    return nil
                }
                return envelope.applyingRemote(record, id: record.id)
            }
        }
        if isComplete {
            let listed = Set(set.records.map(\.id))
            let all: ChangeSet
            do { all = try await local.fetchAll(in: zone) } catch { throw MirrorError.wrapping(error, "reading the replica") }
            for record in all.records where record.id != Self.stateRecordID && !listed.contains(record.id) {
                updates[record.id] = { envelope in
                    guard let envelope, envelope.local == nil, envelope.remote != nil else { return nil }
                    return envelope.applyingRemote(nil, id: record.id)
                }
            }
        }
        let newState = ReplicaSyncState(remote: remote.identifier, token: set.token)
        try await updateReplica(zone, updates, syncState: newState)
        if rebuild {
            replication.withLock { $0.zones[zone]?.corruptionSeen = corruption }
            report(MirrorError(
                .corruptEntry,
                "the replica of zone \(zone) had entries that could not be read; its records were reloaded "
                    + "from the remote, and the local changes in the readable entries are kept",
                recordType: zone.recordType, scope: zone.scope, file: local.directory(of: zone).path),
                key: "rebuilt|\(zone)|\(corruption)")
        }
    }

    /// The number of entries of the zone's replica files the JSON-file database quarantined.
    private func corruptEntries(in zone: ZoneID) -> Int {
        let directory = local.directory(of: zone).path + "/"
        return local.problems.reduce(0) { count, problem in
            count + (problem.kind == .corruptEntry && (problem.file?.hasPrefix(directory) ?? false) ? 1 : 0)
        }
    }

    // MARK: Writing the replica

    /// Applies `updates` (each returns the record's new envelope, or `nil` to leave it) and
    /// the new synchronisation state to the replica in one commit, reading and trying again
    /// when another writer changed the records meanwhile. Tells subscribers of the views that
    /// changed.
    private func updateReplica(
        _ zone: ZoneID, _ updates: [String: @Sendable (ReplicaEnvelope?) -> ReplicaEnvelope?],
        syncState: ReplicaSyncState? = nil
    ) async throws(MirrorError) {
        guard !updates.isEmpty || syncState != nil else { return }
        var ids = Array(updates.keys)
        if syncState != nil { ids.append(Self.stateRecordID) }
        let stateFields = syncState.flatMap { try? JSONEncoder().encode($0) }
        for _ in 0..<Self.replicaAttempts {
            let stored = try await replicaRecords(ids, in: zone)
            var operations: [RecordOperation] = []
            var changed: [StoredRecord] = []
            var waiting: [(String, HLCTimestamp?)] = []
            for (id, update) in updates {
                let record = stored[id]
                let envelope = record.flatMap { self.envelope(of: $0) }
                guard let next = update(envelope), next != envelope else { continue }
                operations.append(.save(
                    id, fields: next.encoded(), baseVersion: record?.version ?? 0,
                    timestamp: HybridLogicalClock.shared.now()))
                if next.version != envelope?.version { changed.append(next.view(id)) }
                waiting.append((id, next.local?.timestamp))
            }
            if let stateFields, let syncState {
                let current = stored[Self.stateRecordID]
                let saved = current?.fields.flatMap { try? JSONDecoder().decode(ReplicaSyncState.self, from: $0) }
                if saved != syncState {
                    operations.append(.save(
                        Self.stateRecordID, fields: stateFields, baseVersion: current?.version ?? 0,
                        timestamp: HybridLogicalClock.shared.now()))
                }
            }
            guard !operations.isEmpty else { return }
            let outcome: CommitOutcome
            do {
                outcome = try await local.commit(operations, to: zone)
            } catch {
                throw MirrorError.wrapping(error, "writing the replica")
            }
            guard outcome.isApplied else { continue }
            noteWaiting(waiting, in: zone)
            notify(changed, in: zone, token: outcome.token, writer: nil)
            return
        }
        throw busyReplica(zone)
    }

    // MARK: Reporting

    /// Reports a problem once per `key`: in ``problems`` and as a `.mirrorError`.
    func report(_ problem: MirrorError, key: String) {
        guard replication.withLock({ $0.record(problem, key: key) }) else { return }
        NotificationCenter.default.post(name: .mirrorError, object: problem)
    }

    /// Gives observers the status when it changed since they last got it.
    func publishStatus() {
        let changed = replication.withLock { state -> ReplicationStatus? in
            let status = state.status
            guard status != state.published else { return nil }
            state.published = status
            return status
        }
        guard let changed else { return }
        for continuation in statusObservers.withLock({ Array($0.all.values) }) { continuation.yield(changed) }
    }
}

extension RecordOperation {
    /// The fields a save stores; `nil` for a deletion.
    var savedFields: Data? {
        if case .save(let fields) = action { return fields }
        return nil
    }
}

/// Lets one task at a time through: the exchanges of the background task and of
/// ``ReplicatedDatabase/synchronize()`` never overlap.
final class AsyncGate: Sendable {
    private let state = Mutex<(busy: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Waits until the gate is free and takes it.
    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enter = state.withLock { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if enter { continuation.resume() }
        }
    }

    /// Frees the gate, handing it to the next waiter.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
