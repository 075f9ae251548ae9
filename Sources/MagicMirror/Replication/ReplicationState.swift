import Foundation

/// The mutable state of a ``ReplicatedDatabase``, guarded by its mutex: the zones it
/// synchronises, what waits in each, the phase, and what was reported.
///
/// Everything durable lives in the replica; this is what one process knows of it, rebuilt
/// from the replica by reading it (``ReplicatedDatabase`` `refreshWaiting`).
struct ReplicationState: Sendable {
    /// A change the remote refused for good, or whose conflict nobody here can settle.
    struct Held: Sendable {
        /// The clock reading of the held local change; a newer change releases it.
        var timestamp: HLCTimestamp
        var error: MirrorError
        /// Held because no mirror of the record type is open to settle its conflict.
        var unsettled: Bool
    }

    /// One zone being synchronised.
    struct Zone: Sendable {
        /// The replica's token up to which ``waiting`` is known; `nil` before the first read.
        var replicaToken: ChangeToken?
        /// The records with a local change waiting for the remote, and the change's clock.
        var waiting: [String: HLCTimestamp] = [:]
        var held: [String: Held] = [:]
        /// The subscription to the remote's notifications, once made.
        var remoteSubscription: MirrorCancellable?
        /// The subscription to the replica's notifications (other processes' commits).
        var replicaSubscription: MirrorCancellable?
        /// The corrupt replica entries of the zone already answered by a rebuild.
        var corruptionSeen = 0

        func isHeld(_ id: String) -> Bool {
            guard let held = held[id] else { return false }
            return waiting[id] == held.timestamp
        }
    }

    var zones: [ZoneID: Zone] = [:]
    var phase = ReplicationStatus.Phase.syncing
    var lastSuccessfulSync: Date?
    /// Consecutive failed exchanges, for the backoff.
    var failures = 0
    var problems: [MirrorError] = []
    /// Keys of the problems reported, so each is reported once.
    var reported: Set<String> = []
    /// The status last given to observers.
    var published: ReplicationStatus?

    /// The most problems kept in ``problems``.
    static let problemLimit = 100

    var status: ReplicationStatus {
        var pending = 0
        var held = 0
        for zone in zones.values {
            pending += zone.waiting.count
            held += zone.held.keys.reduce(0) { $0 + (zone.isHeld($1) ? 1 : 0) }
        }
        return ReplicationStatus(
            phase: phase, pendingChanges: pending, heldChanges: held, lastSuccessfulSync: lastSuccessfulSync)
    }

    /// The error of a change still held, if any.
    var firstHeldError: MirrorError? {
        for zone in zones.values {
            for (id, held) in zone.held where zone.isHeld(id) { return held.error }
        }
        return nil
    }

    /// Records what now waits for the remote: for each record, the clock of its waiting
    /// change, or `nil` when none waits. A newer change of a held record releases it.
    mutating func note(_ waiting: [(String, HLCTimestamp?)], in zone: ZoneID) {
        guard var entry = zones[zone] else { return }
        for (id, timestamp) in waiting {
            entry.waiting[id] = timestamp
            if let held = entry.held[id], held.timestamp != timestamp { entry.held[id] = nil }
        }
        zones[zone] = entry
    }

    /// The waiting records to push next, oldest change first, held ones left out.
    func pushCandidates(in zone: ZoneID, limit: Int) -> [String] {
        guard let entry = zones[zone] else { return [] }
        return entry.waiting
            .filter { !entry.isHeld($0.key) }
            .sorted { ($0.value, $0.key) < ($1.value, $1.key) }
            .prefix(limit)
            .map(\.key)
    }

    /// Releases the changes held because no mirror of `recordType` could settle them.
    mutating func releaseUnsettled(recordType: String) {
        for zone in zones.keys where zone.recordType == recordType {
            let kept = zones[zone]?.held.filter { !$0.value.unsettled } ?? [:]
            zones[zone]?.held = kept
        }
    }

    /// Adds a problem unless one with `key` was reported; returns whether to post it.
    mutating func record(_ problem: MirrorError, key: String) -> Bool {
        guard reported.insert(key).inserted else { return false }
        problems.append(problem)
        if problems.count > Self.problemLimit { problems.removeFirst(problems.count - Self.problemLimit) }
        return true
    }
}

/// The synchronisation state a replica zone keeps in its reserved record: which remote it
/// replicates and the remote's token the replica reflects.
struct ReplicaSyncState: Codable, Equatable, Sendable {
    /// The remote's ``RecordDatabase/identifier``.
    var remote: String
    /// The remote's token of the zone, up to which its changes are in the replica.
    var token: ChangeToken
}
