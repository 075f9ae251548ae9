// Remote changes and user switches: how the engine follows the database.

extension SyncEngine {
    /// Notes that the zone reached `token`; whether the pulling task must be woken.
    mutating func hint(_ token: ChangeToken) -> Bool {
        guard !delivery.isClosed else { return false }
        return pull.hint(token)
    }

    /// Where a pull started: the token it asks from, the count of commit outcomes, and the
    /// zone and user switches it belongs to.
    struct PullStart {
        var token: ChangeToken
        var commitRounds: Int
        var zone: ZoneID
        var zoneSwitches: Int
    }

    /// Starts a pull if one is due.
    mutating func nextPull(now: ContinuousClock.Instant) -> WorkerStep<PullStart> {
        if case .some(let deadline) = pull.deadline(now: now) { return .wait(until: deadline) }
        let (token, commitRounds) = pull.begin()
        return .run(PullStart(token: token, commitRounds: commitRounds, zone: zone, zoneSwitches: zoneSwitches))
    }

    /// The live records of a change set that are newer than what the mirror knows, to decode
    /// before ``applyPull(_:since:decoded:)``.
    func recordsToDecode(in set: ChangeSet) -> [StoredRecord] {
        pull.recordsToDecode(in: set)
    }

    /// Applies pulled changes: to the stored versions, and to the array for every record
    /// without a local pending change (whose value the array keeps showing until it is
    /// committed; the remote one is held back until then).
    mutating func applyPull(_ set: ChangeSet, since start: PullStart, decoded: IDMap<Result<Record, any Error>>) {
        // Pulled from the zone before a user switch: this engine pulls its own.
        guard start.zoneSwitches == zoneSwitches,
              let vanished = pull.startApplying(set, since: (start.token, start.commitRounds))
        else { return }
        for stored in vanished where !stored.isDeleted && !queue.hasChange(for: stored.id) {
            show(stored.id, nil, origin: .remote, state: .committed)
        }
        for record in set.records {
            guard pull.accept(record, complete: set.isComplete) else { continue }
            if !HybridLogicalClock.shared.observe(record.modified) { reportClockAhead(record) }
            let value = record.isDeleted ? nil : decoded[record.id]
            guard !queue.hasChange(for: record.id) else {
                if record.isDeleted || value != nil { pull.holdBack(record, value: value) }
                continue
            }
            switch value {
            case .success(let value)?:
                show(record.id, value, origin: .remote, state: .committed)
            case .failure(let error)?:
                reportUndecodable(record, error: error)
                show(record.id, nil, origin: .remote, state: .committed)
            case nil:
                if record.isDeleted { show(record.id, nil, origin: .remote, state: .committed) }
            }
        }
        pull.finishApplying(set)
    }

    /// A pull failed: report it and pull again after a backoff.
    mutating func pullFailed(_ error: MirrorError, now: ContinuousClock.Instant) {
        guard error.kind != .cancelled else { return }
        pull.failed(now: now, configuration: configuration)
        report(error)
    }

    // MARK: Switching zones

    /// Starts over in another zone (the private zone of the user a mirror switched to) and
    /// returns the engine of the old one.
    ///
    /// This engine keeps what belongs to the mirror — its listeners, last error, the count
    /// of local changes, its live views, subscription and tasks — and holds the new zone,
    /// empty until a pull (already due) loads it. Every record of the old zone is removed
    /// from the array, each delivered as a committed remote removal.
    ///
    /// The returned engine keeps what belongs to the old zone: its records, its pending
    /// changes and the commits in flight, and the flushes waiting for them (every change a
    /// waiting flush covers was made in the old zone). Its owner commits them there.
    mutating func startOver(in newZone: ZoneID) -> SyncEngine<Record> {
        var old = self
        old.liveViews = [:]
        old.liveViewUpdates = []
        old.retention = .notRetained
        old.subscription = nil
        old.workers = []

        var fresh = SyncEngine(zone: newZone, writerID: writerID, configuration: configuration, policy: policy)
        fresh.zoneSwitches = zoneSwitches + 1
        fresh.changeSequence = changeSequence
        fresh.delivery = old.delivery.handOver()
        fresh.retention = retention  // released by the next drain, outside the lock
        fresh.subscription = subscription
        fresh.workers = workers
        fresh.pull.pullAnyway()
        fresh.liveViews = liveViews
        fresh.liveViewUpdates = liveViewUpdates
        for record in records.array {
            fresh.emit(MirrorChange(kind: .removed, recordID: record.recordID, record: nil, origin: .remote, state: .committed))
        }
        self = fresh
        return old
    }
}
