import Foundation

/// What a mirror knows of the database: the stored version of each record, the change token
/// they reflect, whether a pull is due, and the remote versions held back behind a local
/// change of the same record.
///
/// A value type with no locks: ``SyncEngine`` holds one, asks it what a pulled change set
/// means, and shows the results.
struct PullTracker<Record: Recordable>: Sendable {
    /// Whether the pulling task has something to do.
    enum Phase: Sendable, Equatable {
        /// Nothing is known beyond ``PullTracker/token``.
        case idle
        /// A notification (or a commit) announced that the zone reached this token.
        case due(ChangeToken)
        /// Pull whatever the token: a complete change set was set aside, a discarded change
        /// may have been stored after all, or the zone is new to the mirror.
        case dueAnyway
        /// The last pull failed: pull again at that instant.
        case retrying(at: ContinuousClock.Instant)
    }

    /// A remote version pulled while a local change of the record was pending or being
    /// committed, with its decoded value (`nil` for a deletion).
    struct HeldBack: Sendable {
        let record: StoredRecord
        let value: Result<Record, any Error>?
    }

    /// The latest stored version the mirror knows of each record, tombstones included.
    private(set) var storedRecords: IDMap<StoredRecord> = [:]
    /// The token of the changes applied to ``storedRecords``.
    private(set) var token = ChangeToken.initial
    private(set) var phase = Phase.idle
    /// Counts commits that returned an outcome, so that a pull can tell whether one did
    /// meanwhile.
    private(set) var commitRounds = 0
    private var backoff = RetryBackoff()
    /// The remote versions held back, by id. The array keeps showing the local value
    /// meanwhile and takes the remote one when the local change ends without superseding
    /// it: otherwise the array would lag behind ``storedRecords``, and the next local edit,
    /// based on the newer version but made on the older value, would undo the remote change.
    private var heldBack: IDMap<HeldBack> = [:]

    /// The stored record the mirror knows for `id`, tombstones included.
    subscript(id: String) -> StoredRecord? { storedRecords[id] }

    /// Takes a whole zone as the starting point: the database's table of it when the set
    /// carries one (shared until either side changes a record), else a table of its records.
    mutating func load(_ set: ChangeSet) {
        if let table = set.recordsByID {
            storedRecords = table
        } else {
            storedRecords.reserveCapacity(set.records.count)
            for record in set.records { storedRecords[record.id] = record }
        }
        token = set.token
    }

    // MARK: When to pull

    /// Notes that the zone reached `hinted`; whether the pulling task must be woken.
    mutating func hint(_ hinted: ChangeToken) -> Bool {
        guard hinted > token else { return false }
        switch phase {
        case .idle:
            phase = .due(hinted)
            return true
        case .due(let target):
            guard hinted > target else { return false }
            phase = .due(hinted)
            return true
        case .dueAnyway, .retrying:
            // The coming pull reads everything since the token, which includes it.
            return false
        }
    }

    /// Asks for a pull whatever the token.
    mutating func pullAnyway() {
        if case .retrying = phase { return }
        phase = .dueAnyway
    }

    /// When the next pull may start: `nil` now; `.some(nil)` only when woken.
    func deadline(now: ContinuousClock.Instant) -> ContinuousClock.Instant?? {
        switch phase {
        case .idle: .some(nil)
        case .due(let target): target > token ? nil : .some(nil)
        case .dueAnyway: nil
        case .retrying(let instant): now < instant ? .some(instant) : nil
        }
    }

    /// Starts a pull: returns the token it reads from and the count of commit outcomes.
    mutating func begin() -> (token: ChangeToken, commitRounds: Int) {
        phase = .idle
        return (token, commitRounds)
    }

    /// A pull failed: pull again after a backoff.
    mutating func failed(now: ContinuousClock.Instant, configuration: MirrorConfiguration) {
        backoff.failed(now: now, configuration: configuration)
        phase = .retrying(at: backoff.retryAt ?? now)
    }

    // MARK: What a pull brings

    /// The live records of a change set that are newer than what the mirror knows, which
    /// must be decoded before they are applied.
    func recordsToDecode(in set: ChangeSet) -> [StoredRecord] {
        set.records.filter { record in !record.isDeleted && isNewer(record, complete: set.isComplete) }
    }

    /// Whether a pulled record is newer than what the mirror knows of its id: a later version,
    /// or, in a complete change set (the zone as it is at its token), another record under
    /// the same id, made at another time (in a shared zone, another owner's record once the
    /// first owner's share ended: its version can be lower).
    private func isNewer(_ record: StoredRecord, complete: Bool) -> Bool {
        guard let known = storedRecords[record.id] else { return true }
        return known.version < record.version || (complete && known.created != record.created)
    }

    /// Starts applying pulled changes; returns the records a complete set no longer lists
    /// (forgotten here), or `nil` when the set is set aside and a pull is due again.
    ///
    /// Commits run while a pull does. Records are applied only when newer than the version
    /// the mirror knows (``accept(_:)``), so an incremental change set applies safely
    /// whatever committed meanwhile; a complete one, which also tells which records are
    /// gone, is set aside and pulled again when a commit completed meanwhile. An
    /// incremental one from another generation is set aside too.
    mutating func startApplying(_ set: ChangeSet, since start: (token: ChangeToken, commitRounds: Int)) -> [StoredRecord]? {
        if set.isComplete ? start.commitRounds != commitRounds : set.token.generation != token.generation {
            pullAnyway()
            return nil
        }
        guard set.isComplete else { return [] }
        let listed = Set(set.records.map(\.id))
        var vanished: [StoredRecord] = []
        for (id, stored) in storedRecords where !listed.contains(id) { vanished.append(stored) }
        for stored in vanished { storedRecords[stored.id] = nil }
        return vanished
    }

    /// Takes a pulled record when it is newer than what the mirror knows (see
    /// ``recordsToDecode(in:)``); whether it was.
    ///
    /// A complete change set's copy of the very version the mirror knows is taken too (with
    /// `false`) when its fields lie elsewhere: the database read the zone again (another
    /// process compacted it), and the copy read before would keep the buffers its fields lie
    /// in, a large zone's spill file among them (``FieldsSpill``), as long as the mirror.
    /// (The same bytes are left alone: a table shared with the database stays shared.)
    ///
    /// - Parameter complete: Whether it comes from a complete change set.
    mutating func accept(_ record: StoredRecord, complete: Bool) -> Bool {
        guard isNewer(record, complete: complete) else {
            if complete, let known = storedRecords[record.id], known.version == record.version,
               !Self.sameBytes(known.fields, record.fields) {
                storedRecords[record.id] = record
            }
            return false
        }
        storedRecords[record.id] = record
        return true
    }

    /// Whether two copies of a record's fields are the very same bytes in memory, not only
    /// equal ones (which would read them all).
    private static func sameBytes(_ left: Data?, _ right: Data?) -> Bool {
        guard let left, let right else { return left == nil && right == nil }
        return left.count == right.count
            && left.withUnsafeBytes { leftBytes in
                right.withUnsafeBytes { leftBytes.baseAddress == $0.baseAddress }
            }
    }

    /// Ends applying a change set: the mirror has reached its token.
    mutating func finishApplying(_ set: ChangeSet) {
        if set.isComplete || set.token > token { token = set.token }
        backoff.succeeded()
    }

    /// Keeps a remote version to show once the local change of its record ends.
    mutating func holdBack(_ record: StoredRecord, value: Result<Record, any Error>?) {
        heldBack[record.id] = HeldBack(record: record, value: value)
    }

    /// Whether some remote version is held back (usually not: then no record needs looking up).
    var hasHeldBack: Bool { !heldBack.isEmpty }

    /// Takes the remote version held back for `id`, if it is still the latest stored one
    /// (the mirror's own commit may have superseded it).
    mutating func takeHeldBack(_ id: String) -> HeldBack? {
        guard let held = heldBack.removeValue(forKey: id), storedRecords[id]?.version == held.record.version else {
            return nil
        }
        return held
    }

    // MARK: What a commit brings

    /// Remembers a stored version, unless a newer one is known.
    mutating func remember(_ stored: StoredRecord) {
        if let known = storedRecords[stored.id], known.version > stored.version { return }
        storedRecords[stored.id] = stored
    }

    /// Forgets the stored version of `id` (a conflict said it no longer exists).
    mutating func forget(_ id: String) {
        storedRecords[id] = nil
    }

    /// Replaces a stored version the mirror shows with an equal rewrite of it (a migration).
    mutating func replace(_ stored: StoredRecord) {
        storedRecords[stored.id] = stored
    }

    /// Counts a commit that returned an outcome with `outcome` as its token: when nothing
    /// else was committed in between, the mirror is up to date with it; otherwise a pull is
    /// due. Returns whether the pulling task must be woken.
    mutating func committed(upTo outcome: ChangeToken?) -> Bool {
        commitRounds += 1
        guard let outcome else { return false }
        if outcome.generation == token.generation, outcome.sequence == token.sequence + 1 {
            token = outcome
            return false
        }
        return hint(outcome)
    }
}
