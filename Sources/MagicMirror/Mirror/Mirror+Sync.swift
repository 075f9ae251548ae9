import Foundation
import Observation
import Synchronization

// The background tasks: one pulls remote changes, the other commits local ones, retrying.

extension Mirror: ZoneSubscriber {
    func zoneChanged(upTo token: ChangeToken) {
        if core.withLock({ $0.hint(token) }) { pullWakeup.signal() }
    }
}

extension Mirror {
    /// Starts the two background tasks: one pulls remote changes, the other commits local
    /// ones, so that a slow commit does not hold back remote changes. Each runs its steps one
    /// at a time, holds the mirror weakly except while it works, and ends with the mirror.
    /// (While changes wait to be committed, the mirror holds itself; see
    /// `SyncEngine.drain(owner:)`.)
    func startWorkers() {
        let pullWakeup = self.pullWakeup
        let commitWakeup = self.commitWakeup
        let puller = Task { [weak self] in
            while !Task.isCancelled {
                guard let deadline = await Mirror.work(self, pulling: true) else { return }
                await pullWakeup.wait(until: deadline)
            }
        }
        let committer = Task { [weak self] in
            while !Task.isCancelled {
                guard let deadline = await Mirror.work(self, pulling: false) else { return }
                await commitWakeup.wait(until: deadline)
            }
        }
        core.withLock { $0.workers = [puller, committer] }
    }

    /// Runs steps until there is nothing to do. Returns when to look again (`.some(nil)`:
    /// only when woken), or `nil` when the mirror is gone. The strong reference it takes is
    /// released when it returns, before the caller waits.
    private static func work(_ mirror: Mirror?, pulling: Bool) async -> ContinuousClock.Instant?? {
        guard let mirror else { return nil }
        while !Task.isCancelled {
            if pulling {
                switch mirror.core.withLock({ $0.nextPull(now: .now) }) {
                case .run(let start): await mirror.pull(start)
                case .wait(let deadline): return .some(deadline)
                }
            } else {
                switch mirror.core.withLock({ $0.nextBatch(now: .now) }) {
                case .run(let batch): await mirror.commit(batch)
                case .wait(let deadline): return .some(deadline)
                }
            }
        }
        return nil
    }

    /// Pulls the changes since the token `start` holds and applies them.
    func pull(_ start: SyncEngine<Record>.PullStart) async {
        let set: ChangeSet
        do {
            set = try await database.changes(in: start.zone, since: start.token)
        } catch {
            let failure = mirrorError(error, while: "reading changes", in: start.zone)
            let effects = core.withLock { engine in
                // After a user switch, the failure of a pull of the old zone does not matter.
                if engine.zoneSwitches == start.zoneSwitches { engine.pullFailed(failure, now: .now) }
                return engine.drain(owner: self)
            }
            deliver(effects)
            return
        }
        let needDecoding = core.withLock { $0.recordsToDecode(in: set) }
        let decoded = schema.decode(needDecoding)
        let mayChangeArray = set.isComplete || !needDecoding.isEmpty || set.records.contains(where: \.isDeleted)
        if mayChangeArray { registrar.willSet(self, keyPath: dataModelKey) }
        let effects = core.withLock { engine in
            engine.applyPull(set, since: start, decoded: decoded)
            return engine.drain(owner: self)
        }
        if mayChangeArray { registrar.didSet(self, keyPath: dataModelKey) }
        deliver(effects)
    }

    /// Commits a batch of pending changes and handles the outcome.
    ///
    /// The outcome is applied to the engine the batch was taken from: after a user switch
    /// made while the commit ran, that is the engine of the old user's zone, which the
    /// mirror finishing that zone's commits holds (see ``withEngine(after:_:)``).
    func commit(_ batch: SyncEngine<Record>.Batch) async {
        var operations: [RecordOperation] = []
        var sent: [PendingEntry<Record>] = []
        var unencodable: [(PendingEntry<Record>, MirrorError)] = []
        operations.reserveCapacity(batch.entries.count)
        sent.reserveCapacity(batch.entries.count)
        // The values to encode, encoded together: one buffer (and, for a large batch, one
        // thread) per part rather than an encoder and a buffer per record.
        let values = batch.entries.compactMap { $0.resolvedFields == nil ? $0.value : nil }
        var encoded = BatchJSONCoding.encode(values, with: schema.encoder).makeIterator()
        for entry in batch.entries {
            if entry.value != nil {
                let fields: Data
                if let resolved = entry.resolvedFields {
                    fields = resolved
                } else {
                    do {
                        // One result per value, in order.
                        let written = try encoded.next()!.get()
                        fields = try schema.sealed(schema.fields(encoded: written, over: entry.base?.fields))
                    } catch {
                        unencodable.append((entry, encodingError(entry.recordID, error, in: batch.zone)))
                        continue
                    }
                }
                operations.append(.save(
                    entry.recordID, fields: fields, baseVersion: entry.baseVersion, timestamp: entry.timestamp))
            } else {
                operations.append(.delete(entry.recordID, baseVersion: entry.baseVersion, timestamp: entry.timestamp))
            }
            sent.append(entry)
        }
        if !unencodable.isEmpty {
            withEngine(after: batch.zoneSwitches) { engine in engine.encodingFailed(unencodable) }
        }
        guard !sent.isEmpty else { return }
        // The zone's tokens delivered while the commit runs are held for its end, so that the
        // mirror does not hear its own commit (see ZoneSubscriptions).
        let membership = core.withLock { $0.zoneSwitches == batch.zoneSwitches ? $0.subscription : nil }
        membership?.beginCommit()
        var ended = false
        func endCommit(upTo token: ChangeToken?) {
            if !ended { membership?.endCommit(upTo: token) }
            ended = true
        }
        defer { endCommit(upTo: nil) }
        let outcome: CommitOutcome
        do {
            outcome = try await database.commit(operations, to: batch.zone)
        } catch {
            let blamed = (error as? MirrorError)?.recordIDs ?? []
            let failure = mirrorError(error, while: "committing", in: batch.zone).adding(recordIDs: sent.map(\.recordID))
            guard failure.kind == .refused else {
                withEngine(after: batch.zoneSwitches) { engine in
                    engine.commitFailed(sent, error: failure, blamed: blamed, now: .now)
                }
                return
            }
            guard let (owner, refused) = withEngine(after: batch.zoneSwitches, { engine in
                engine.commitRefused(sent, error: failure, blamed: blamed, now: .now)
            }), !refused.isEmpty else { return }
            owner.settleRefusal(refused, error: failure)
            return
        }
        if outcome.isApplied {
            guard let (owner, pullDue) = withEngine(after: batch.zoneSwitches, { engine in
                engine.commitApplied(sent, outcome: outcome)
            }) else { return }
            if pullDue { owner.pullWakeup.signal() }
            // Wakes the zone's other mirrors in this process if the database did not (this
            // one is up to date, unless another commit came in between).
            endCommit(upTo: outcome.token)
            return
        }
        endCommit(upTo: nil)
        guard let (owner, taken) = withEngine(after: batch.zoneSwitches, { engine in
            (engine.commitConflicted(sent, outcome: outcome), engine.policy, engine.writerID)
        }) else { return }
        let (conflicts, policy, writerID) = taken
        let resolutions = conflicts.map { owner.resolve($0, policy: policy, writerID: writerID, in: batch.zone) }
        // A user switch made meanwhile leaves the conflicts in the old zone's engine (taken
        // back and queued there): `apply` then finds no matching entry here, and the next
        // commit of the mirror finishing that zone meets them again and resolves them.
        owner.changingDataModel { engine in
            for (conflict, resolution) in zip(conflicts, resolutions) { engine.apply(resolution, to: conflict) }
        }
    }

    /// Runs `body` on the engine as a change of ``dataModel``: Observation is told before and
    /// after, and the effects are delivered once the lock is released.
    @discardableResult
    func changingDataModel<Result>(_ body: (inout SyncEngine<Record>) -> Result) -> Result {
        registrar.willSet(self, keyPath: dataModelKey)
        let (result, effects) = core.withLock { engine in (body(&engine), engine.drain(owner: self)) }
        registrar.didSet(self, keyPath: dataModelKey)
        deliver(effects)
        return result
    }

    /// Runs `body` on the engine the changes made after `zoneSwitches` user switches belong
    /// to, and delivers the effects.
    ///
    /// That is this mirror's engine, unless the mirror switched users since: then it is the
    /// engine of the old user's zone, held by the mirror the switch made to finish its
    /// commits (whose committing task is then woken).
    ///
    /// - Returns: The mirror whose engine it was and what `body` returned, or `nil` when no
    ///   engine holds those changes any more.
    @discardableResult
    func withEngine<Result>(
        after zoneSwitches: Int, _ body: (inout SyncEngine<Record>) -> Result
    ) -> (owner: Mirror<Record>, result: Result)? {
        let done = core.withLock { engine -> (Result, SyncEngine<Record>.Effects)? in
            guard engine.zoneSwitches == zoneSwitches else { return nil }
            let result = body(&engine)
            return (result, engine.drain(owner: self))
        }
        if let (result, effects) = done {
            deliver(effects)
            return (self, result)
        }
        guard let finisher = account.finisher(after: zoneSwitches), finisher !== self else { return nil }
        let result = finisher.withEngine(after: zoneSwitches, body)
        finisher.commitWakeup.signal()
        return result
    }

    /// A ``MirrorError`` for anything a database threw, with the mirror's context.
    func mirrorError(_ error: any Error, while activity: String, in zone: ZoneID) -> MirrorError {
        MirrorError.wrapping(error, activity).adding(recordType: zone.recordType, scope: zone.scope)
    }

    func encodingError(_ recordID: String, _ error: any Error, in zone: ZoneID) -> MirrorError {
        MirrorError(
            .encodingFailed, "record \(recordID) could not be encoded as a JSON object: \(error)",
            recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope, underlying: error)
    }
}
