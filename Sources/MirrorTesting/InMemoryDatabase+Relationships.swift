import Foundation
import MagicMirror
import Synchronization

/// Delete rules (see MagicMirror's `Relationships` article): stored per scope space and
/// enforced by every commit of every instance sharing the store, atomically with the delete,
/// under the store's one lock. The simulated writers (`simulateDelete`) do not know the
/// rules, like a program that writes the database without MagicMirror: they leave dangling
/// references.
extension InMemoryDatabase: RelationshipDatabase {
    /// Stores the delete rules of `referringType` in the scope space of `zone`, replacing the
    /// type's earlier rules there (see `RelationshipDatabase`).
    ///
    /// - Throws: `MirrorError.Kind.invalidName` or `MirrorError.Kind.invalidRecord` for a
    ///   rule that is not valid; nothing is stored then.
    public func registerDeleteRules(
        _ rules: [StoredDeleteRule], referringType: String, in zone: ZoneID
    ) async throws {
        try zone.validate()
        try DeleteRuleSet.check(rules, referringType: referringType)
        store.contents.withLock { contents in
            contents.deleteRules[zone.spaceKey] = DeleteRuleSet.replacing(
                contents.deleteRules[zone.spaceKey] ?? [], of: referringType, with: rules)
        }
    }

    /// The delete rules stored for the scope space of `zone`, in no particular order.
    public func deleteRules(in zone: ZoneID) -> [StoredDeleteRule] {
        store.contents.withLock { $0.deleteRules[zone.spaceKey] ?? [] }
    }
}

extension InMemoryDatabase.Store {
    /// Commits `operations` with the delete rules of the zone's scope space, when any rule
    /// targets the zone's record type and the commit deletes; `nil` otherwise (a plain
    /// commit). The commit and every change the rules make are applied under one lock.
    func performLinked(
        _ operations: [RecordOperation], to zone: ZoneID, writer: String, databaseIdentifier: String
    ) throws(MirrorError) -> CommitOutcome? {
        guard operations.contains(where: { $0.action == .delete }) else { return nil }
        let clock = HybridLogicalClock.shared
        for operation in operations { clock.observe(operation.timestamp) }
        let timestamp = clock.now()
        let result = try contents.withLock { contents throws(MirrorError) -> (CommitOutcome, [[RemoteNotification]])? in
            let rules = contents.deleteRules[zone.spaceKey] ?? []
            guard rules.contains(where: { $0.targetType == zone.recordType }) else { return nil }
            let before = contents.zones[zone] ?? ZoneState()
            let prepared: [StoredRecord?]
            switch before.prepare(operations, writer: writer) {
            case .failure(let conflict):
                contents.log(.completed(conflict.outcome), zone: zone, writer: writer, operations: operations, simulated: false)
                return (conflict.outcome, [])
            case .success(let records):
                prepared = records
            }
            let produced = prepared.compactMap { $0 }
            let plan = RelationshipPlan(produced, type: zone.recordType, rules: rules, scope: zone.scope) { type in
                guard let sibling = try? zone.sibling(type) else { return [] }
                return contents.zones[sibling]?.liveRecords ?? []
            }
            let changes: [String: [LinkedChange]]
            switch plan {
            case .refuse(let error):
                contents.log(.failed(error), zone: zone, writer: writer, operations: operations, simulated: false)
                throw error
            case .apply(let planned):
                changes = planned
            }
            // Every zone's records first, then store them all: nothing below can fail.
            var notifications: [[RemoteNotification]] = []
            let batches = try LinkedBatch.batches(
                of: zone, produced: produced, changes: changes, writer: writer, timestamp: timestamp)
            let writes = batches.map { batch in
                let state = contents.zones[batch.zone] ?? ZoneState()
                return (zone: batch.zone, commits: batch.commits(stored: { state.records[$0] }))
            }
            for write in writes {
                for records in write.commits {
                    let sequence = (contents.zones[write.zone]?.token.sequence ?? 0) + 1
                    contents.zones[write.zone, default: ZoneState()].apply(records, sequence: sequence)
                    let state = contents.zones[write.zone] ?? ZoneState()
                    notifications.append(state.notifications(
                        for: records, databaseIdentifier: databaseIdentifier, zone: write.zone, writer: writer))
                }
            }
            let state = contents.zones[zone] ?? ZoneState()
            let outcome = CommitOutcome(
                results: operations.compactMap { state.records[$0.recordID].map(CommitOutcome.Result.applied) },
                token: state.token)
            contents.log(.completed(outcome), zone: zone, writer: writer, operations: operations, simulated: false)
            return (outcome, notifications)
        }
        guard let (outcome, notifications) = result else { return nil }
        for zoneNotifications in notifications { subscribers.deliver(zoneNotifications) }
        return outcome
    }
}
