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
