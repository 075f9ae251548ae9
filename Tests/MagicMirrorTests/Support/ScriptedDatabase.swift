import Foundation
import MagicMirror
import Synchronization

/// Wraps a database to script its commits for mirror tests: fail the next ones, fail every
/// one that names a record, store one and then throw, hold them (or their outcomes) until
/// released, silence its notifications, and count calls and subscriptions.
final class ScriptedDatabase: RecordDatabase, Sendable {
    let base: any RecordDatabase

    var identifier: String { base.identifier }
    var writerID: String { base.writerID }
    /// The user the database says it connects as (none unless given).
    let connectedUser: MirrorUser?

    /// One call of ``commit(_:to:)``.
    struct Attempt: Sendable, CustomStringConvertible {
        var recordIDs: [String]
        var error: MirrorError?
        var applied: Bool
        var description: String {
            "\(recordIDs) \(error.map { "failed: \($0.kind)" } ?? (applied ? "applied" : "conflicted"))"
        }
    }

    private struct State {
        var failures: [(kind: MirrorError.Kind, recordIDs: [String])] = []
        var failEveryCommit: MirrorError.Kind?
        /// Commits that name this record fail with this kind, naming the record or none.
        var poison: (recordID: String, kind: MirrorError.Kind, namesIt: Bool)?
        var isHolding = false
        var held: [CheckedContinuation<Void, Never>] = []
        var isHoldingPulls = false
        var heldPulls: [CheckedContinuation<Void, Never>] = []
        var isHoldingOutcomes = false
        var heldOutcomes: [CheckedContinuation<Void, Never>] = []
        /// The next commit that names this record is stored, then throws as if its answer
        /// were lost.
        var throwAfterStoring: String?
        /// Subscriptions deliver nothing.
        var isSilent = false
        var completeChangeSets = 0
        var liveSubscriptions = 0
        var subscribeCalls = 0
    }

    private let state = Mutex(State())
    /// Every commit call, in order.
    let attempts = AsyncCollector<Attempt>()
    /// The record ids of every commit that started waiting because of ``hold()``.
    let heldCommits = AsyncCollector<[String]>()

    init(_ base: any RecordDatabase, connectedUser: MirrorUser? = nil) {
        self.base = base
        self.connectedUser = connectedUser
    }

    /// Makes the next `count` commits throw a `kind` error naming `recordIDs`.
    func failNextCommits(_ count: Int, with kind: MirrorError.Kind, recordIDs: [String] = []) {
        state.withLock { state in
            for _ in 0..<count { state.failures.append((kind, recordIDs)) }
        }
    }

    /// Makes every commit throw a `kind` error until set to `nil`.
    func failEveryCommit(with kind: MirrorError.Kind?) {
        state.withLock { $0.failEveryCommit = kind }
    }

    /// Makes every commit that names `recordID` throw a `kind` error that names no record,
    /// or only that record when `namingIt`.
    func poison(_ recordID: String, with kind: MirrorError.Kind, namingIt: Bool = false) {
        state.withLock { $0.poison = (recordID, kind, namingIt) }
    }

    /// Makes the next commit that names `recordID` store its changes, then throw an
    /// ``MirrorError/Kind/invalidRecord`` error as if the answer were lost: a non-transient
    /// error that does not promise that nothing was stored.
    func throwAfterStoring(recordID: String) {
        state.withLock { $0.throwAfterStoring = recordID }
    }

    /// Makes subscriptions made from now on deliver nothing, so that a mirror learns of
    /// other writers' changes only when it reads by itself or from notifications a test
    /// converts. They are still counted.
    func silenceNotifications() {
        state.withLock { $0.isSilent = true }
    }

    /// Commits wait until ``release()``.
    func hold() {
        state.withLock { $0.isHolding = true }
    }

    /// Lets held commits and later ones through.
    func release() {
        let held = state.withLock { state in
            state.isHolding = false
            defer { state.held.removeAll() }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    /// Calls of ``changes(in:since:)`` wait until ``releasePulls()``.
    func holdPulls() {
        state.withLock { $0.isHoldingPulls = true }
    }

    /// Lets held and later calls of ``changes(in:since:)`` through.
    func releasePulls() {
        let held = state.withLock { state in
            state.isHoldingPulls = false
            defer { state.heldPulls.removeAll() }
            return state.heldPulls
        }
        for continuation in held { continuation.resume() }
    }

    /// Commits are made in the base database (and listed in ``attempts``) but do not return
    /// until ``releaseOutcomes()``: the caller learns late that its commit was stored.
    func holdOutcomes() {
        state.withLock { $0.isHoldingOutcomes = true }
    }

    /// Lets held outcomes and later ones through.
    func releaseOutcomes() {
        let held = state.withLock { state in
            state.isHoldingOutcomes = false
            defer { state.heldOutcomes.removeAll() }
            return state.heldOutcomes
        }
        for continuation in held { continuation.resume() }
    }

    /// How many change sets marked complete ``changes(in:since:)`` returned.
    var completeChangeSets: Int { state.withLock { $0.completeChangeSets } }

    /// The number of subscriptions not cancelled yet.
    var liveSubscriptions: Int { state.withLock { $0.liveSubscriptions } }
    /// The number of calls to ``subscribe(to:handler:)``.
    var subscribeCalls: Int { state.withLock { $0.subscribeCalls } }

    @discardableResult
    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        let ids = operations.map(\.recordID)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let wait = state.withLock { state in
                if state.isHolding { state.held.append(continuation) }
                return state.isHolding
            }
            if wait { heldCommits.append(ids) } else { continuation.resume() }
        }
        let failure: MirrorError? = state.withLock { state in
            if let kind = state.failEveryCommit {
                return MirrorError(kind, "scripted failure of every commit", recordIDs: ids)
            }
            if let poison = state.poison, ids.contains(poison.recordID) {
                return MirrorError(
                    poison.kind, "scripted failure of a commit naming \(poison.recordID)",
                    recordIDs: poison.namesIt ? [poison.recordID] : [])
            }
            if !state.failures.isEmpty {
                let next = state.failures.removeFirst()
                return MirrorError(next.kind, "scripted failure", recordIDs: next.recordIDs)
            }
            return nil
        }
        if let failure {
            attempts.append(Attempt(recordIDs: ids, error: failure, applied: false))
            throw failure
        }
        do {
            let outcome = try await base.commit(operations, to: zone)
            let lostAnswer = state.withLock { state -> Bool in
                guard let id = state.throwAfterStoring, ids.contains(id) else { return false }
                state.throwAfterStoring = nil
                return true
            }
            if lostAnswer {
                throw MirrorError(.invalidRecord, "scripted: stored, then the answer was lost", recordIDs: ids)
            }
            attempts.append(Attempt(recordIDs: ids, error: nil, applied: outcome.isApplied))
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = state.withLock { state in
                    if state.isHoldingOutcomes { state.heldOutcomes.append(continuation) }
                    return state.isHoldingOutcomes
                }
                if !wait { continuation.resume() }
            }
            return outcome
        } catch let error as MirrorError {
            attempts.append(Attempt(recordIDs: ids, error: error, applied: false))
            throw error
        }
    }

    func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try await base.fetchAll(in: zone)
    }

    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await base.fetch(recordIDs, in: zone)
    }

    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let wait = state.withLock { state in
                if state.isHoldingPulls { state.heldPulls.append(continuation) }
                return state.isHoldingPulls
            }
            if !wait { continuation.resume() }
        }
        let set = try await base.changes(in: zone, since: token)
        if set.isComplete { state.withLock { $0.completeChangeSets += 1 } }
        return set
    }

    func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try await base.currentToken(in: zone)
    }

    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        let isSilent = state.withLock { $0.isSilent }
        let inner = isSilent ? nil : try base.subscribe(to: zone, handler: handler)
        state.withLock { state in
            state.liveSubscriptions += 1
            state.subscribeCalls += 1
        }
        return MirrorCancellable { [weak self] in
            inner?.cancel()
            self?.state.withLock { $0.liveSubscriptions -= 1 }
        }
    }
}
