import Foundation
import Observation
import Synchronization

// The background task: pulls remote changes, commits local ones, retries.

extension Mirror: ZoneHubMember {
    func zoneChanged(upTo token: ChangeToken) {
        if core.withLock({ $0.hint(token) }) { pullWakeup.signal() }
    }
}

extension Mirror {
    /// Starts the two background tasks: one pulls remote changes, the other commits local
    /// ones, so that a slow commit does not hold back remote changes. Each runs its steps one
    /// at a time, holds the mirror weakly except while it works, and ends with the mirror.
    /// (While changes wait to be committed, the mirror holds itself; see
    /// `MirrorState.drain(owner:)`.)
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
        workers.withLock { $0 = [puller, committer] }
    }

    /// Runs steps until there is nothing to do. Returns when to look again (`.some(nil)`:
    /// only when woken), or `nil` when the mirror is gone. The strong reference it takes is
    /// released when it returns, before the caller waits.
    private static func work(_ mirror: Mirror?, pulling: Bool) async -> ContinuousClock.Instant?? {
        guard let mirror else { return nil }
        while !Task.isCancelled {
            let step = mirror.core.withLock { state in
                pulling ? state.nextPull(now: .now) : state.nextCommit(now: .now)
            }
            switch step {
            case .work where pulling:
                await mirror.pull()
            case .work:
                await mirror.commitNextBatch()
            case .wait(let deadline):
                return .some(deadline)
            }
        }
        return nil
    }

    /// Pulls the changes since the mirror's token and applies them.
    func pull() async {
        let since = core.withLock { $0.beginPull() }
        let set: ChangeSet
        do {
            set = try await database.changes(in: since.zone, since: since.token)
        } catch {
            let effects = core.withLock { state in
                // After a user switch, the failure of a pull of the old zone does not matter.
                if state.epoch == since.epoch {
                    state.pullFailed(mirrorError(error, while: "reading changes"), now: .now)
                }
                return state.drain(owner: self)
            }
            deliver(effects)
            return
        }
        let needDecoding = core.withLock { $0.recordsToDecode(in: set) }
        let decoded = schema.decode(needDecoding)
        let mayChangeArray = set.isComplete || !needDecoding.isEmpty || set.records.contains(where: \.isDeleted)
        if mayChangeArray { registrar.willSet(self, keyPath: \.dataModel) }
        let effects = core.withLock { state in
            state.applyPull(set, since: since, decoded: decoded)
            return state.drain(owner: self)
        }
        if mayChangeArray { registrar.didSet(self, keyPath: \.dataModel) }
        deliver(effects)
    }

    /// Commits the next batch of pending changes and handles the outcome.
    ///
    /// The outcome is applied to the state the batch was taken from: after a user switch
    /// made while the commit ran, that is the state of the old user's zone, which the
    /// mirror's heir for that zone holds (see ``settle(_:_:)``).
    func commitNextBatch() async {
        let (batch, zone, epoch) = core.withLock { state in (state.takeBatch(now: .now), state.zone, state.epoch) }
        guard !batch.isEmpty else { return }
        var operations: [RecordOperation] = []
        var sent: [PendingEntry<Record>] = []
        var unencodable: [(PendingEntry<Record>, MirrorError)] = []
        operations.reserveCapacity(batch.count)
        sent.reserveCapacity(batch.count)
        for entry in batch {
            if let value = entry.value {
                let fields: Data
                if let resolved = entry.resolvedFields {
                    fields = resolved
                } else {
                    do {
                        fields = try schema.sealed(schema.fields(for: value, over: entry.base?.fields))
                    } catch {
                        unencodable.append((entry, encodingError(entry.recordID, error)))
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
            settle(epoch) { state in state.encodingFailed(unencodable) }
        }
        guard !sent.isEmpty else { return }
        let outcome: CommitOutcome
        do {
            outcome = try await database.commit(operations, to: zone)
        } catch {
            let blamed = (error as? MirrorError)?.recordIDs ?? []
            let failure = mirrorError(error, while: "committing").adding(recordIDs: sent.map(\.recordID))
            settle(epoch) { state in state.commitFailed(sent, error: failure, blamed: blamed, now: .now) }
            return
        }
        if outcome.isApplied {
            if let owner = settle(epoch, { state in state.commitApplied(sent, outcome: outcome) })?.owner {
                owner.membership.withLock { $0 }?.notifySiblings(upTo: outcome.token)
                owner.pullWakeup.signal()
            }
            return
        }
        guard let (owner, taken) = settle(epoch, { state in
            (state.commitConflicted(sent, outcome: outcome), state.policy, state.writerID)
        }) else { return }
        let (conflicts, policy, writerID) = taken
        let resolutions = conflicts.map { owner.resolve($0, policy: policy, writerID: writerID) }
        owner.registrar.willSet(owner, keyPath: \.dataModel)
        // A user switch made meanwhile leaves the conflicts in the old zone's state (taken
        // back and queued there): `apply` then finds no matching entry here, and the heir's
        // next commit meets them again and resolves them.
        let effects = owner.core.withLock { state in
            for (conflict, resolution) in zip(conflicts, resolutions) { state.apply(resolution, to: conflict) }
            return state.drain(owner: owner)
        }
        owner.registrar.didSet(owner, keyPath: \.dataModel)
        owner.deliver(effects)
    }

    /// Runs `body` on the state the changes of `epoch` belong to, and delivers the effects.
    ///
    /// That is this mirror's state, unless the mirror switched users since: then it is the
    /// state of the old user's zone, held by the heir the switch made for it (whose
    /// committing task is then woken).
    ///
    /// - Returns: The mirror whose state it was and what `body` returned, or `nil` when no
    ///   state holds the changes of `epoch` any more.
    @discardableResult
    func settle<Result>(
        _ epoch: Int, _ body: (inout MirrorState<Record>) -> Result
    ) -> (owner: Mirror<Record>, result: Result)? {
        let settled = core.withLock { state -> (Result, MirrorState<Record>.Effects)? in
            guard state.epoch == epoch else { return nil }
            let result = body(&state)
            return (result, state.drain(owner: self))
        }
        if let (result, effects) = settled {
            deliver(effects)
            return (self, result)
        }
        guard let heir = account.heir(of: epoch), heir !== self else { return nil }
        let result = heir.settle(epoch, body)
        heir.commitWakeup.signal()
        return result
    }

    /// A ``MirrorError`` for anything a database threw, with the mirror's context.
    func mirrorError(_ error: any Error, while activity: String) -> MirrorError {
        MirrorError.wrapping(error, activity).adding(recordType: zone.recordType, scope: zone.scope)
    }

    func encodingError(_ recordID: String, _ error: any Error) -> MirrorError {
        MirrorError(
            .encodingFailed, "record \(recordID) could not be encoded as a JSON object: \(error)",
            recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope, underlying: error)
    }
}
