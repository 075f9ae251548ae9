import Foundation

/// What the delete rules make of one commit: the changes they add to the zones of its
/// scope space, or the refusal of the whole commit.
///
/// Every database MagicMirror ships plans with it, under the locks of every zone the rules
/// can reach (``reachableTypes(from:rules:)``), then stores the commit's own records and the
/// linked changes' records (``LinkedChange/records(applying:stored:writer:timestamp:)``) as
/// one atomic step, or stores nothing.
///
/// The plan follows cascade rules recursively (a record deleted by a cascade deletes the
/// records that cascade from it), then applies nullify and deny rules to everything
/// deleted: a record that refers to a deleted record and is itself deleted in the same
/// commit is no reason to deny.
package enum RelationshipPlan: Sendable {
    /// The changes to make, by record type (the commit's own type included, for rules of a
    /// type that refers to itself), in a stable order.
    case apply([String: [LinkedChange]])
    /// A deny rule holds: ``MirrorError/Kind/refused``, naming the commit's own deleted
    /// records that are denied, marked ``MirrorError/nothingStored``.
    case refuse(MirrorError)

    /// The record types whose zones a commit to `type` may read or change: the referring
    /// types of the rules that target it, and, through cascade rules, of those that target
    /// them; sorted, `type` included.
    package static func reachableTypes(from type: String, rules: [StoredDeleteRule]) -> [String] {
        var reached: Set<String> = [type]
        var frontier = [type]
        while let target = frontier.popLast() {
            for rule in rules where rule.targetType == target {
                guard reached.insert(rule.referringType).inserted else { continue }
                if rule.action == .cascade { frontier.append(rule.referringType) }
            }
        }
        return reached.sorted()
    }

    /// Plans a commit to a zone of `type` that stores `produced`.
    ///
    /// - Parameters:
    ///   - produced: The records the commit's operations store (tombstones for deletes).
    ///   - type: The commit's record type.
    ///   - rules: Every rule of the scope space.
    ///   - scope: The commit's scope, for messages.
    ///   - live: The live records of a record type's zone in the same scope space, as stored
    ///     before the commit.
    package init(
        _ produced: [StoredRecord], type: String, rules: [StoredDeleteRule], scope: Scope?,
        live: (String) -> [StoredRecord]
    ) {
        let byTarget = Dictionary(grouping: rules, by: \.targetType)
        // The commit's own records stand in for the stored ones of its zone.
        var overlay = IDMap<StoredRecord>()
        for record in produced { overlay[record.id] = record }
        var liveCache: [String: [StoredRecord]] = [:]
        func liveRecords(_ recordType: String) -> [StoredRecord] {
            if let cached = liveCache[recordType] { return cached }
            var records = live(recordType)
            if recordType == type {
                records = records.filter { overlay[$0.id] == nil }
                records += produced.filter { !$0.isDeleted }
            }
            liveCache[recordType] = records
            return records
        }

        // Cascades first: every record deleted, with the commit's own record it stems from.
        var deleted: [String: IDMap<String>] = [:]
        var order: [String: [String]] = [:]
        var frontier: [(type: String, ids: IDMap<String>)] = []
        let own = produced.filter(\.isDeleted)
        if !own.isEmpty {
            var roots = IDMap<String>()
            for record in own { roots[record.id] = record.id }
            deleted[type] = roots
            frontier.append((type, roots))
        }
        while let (targetType, ids) = frontier.popLast() {
            var reached: [String: IDMap<String>] = [:]
            for rule in byTarget[targetType] ?? [] where rule.action == .cascade {
                for record in liveRecords(rule.referringType) {
                    guard deleted[rule.referringType]?[record.id] == nil,
                          reached[rule.referringType]?[record.id] == nil,
                          let fields = record.fields else { continue }
                    let targets = ReferenceFields.targets(in: fields, field: rule.field, targetType: targetType)
                    guard let root = targets.lazy.compactMap({ ids[$0] }).first else { continue }
                    reached[rule.referringType, default: IDMap()][record.id] = root
                    order[rule.referringType, default: []].append(record.id)
                }
            }
            for (referringType, newIDs) in reached {
                for (id, root) in newIDs { deleted[referringType, default: IDMap()][id] = root }
                frontier.append((referringType, newIDs))
            }
        }

        // Then nullify and deny, against everything deleted.
        var nullified: [String: IDMap<[LinkedChange.Nullification]>] = [:]
        var nullifiedOrder: [String: [String]] = [:]
        var deniedRoots: [String] = []
        var deniedSeen = IDSet()
        var reasons: [String] = []
        for (targetType, ids) in deleted.sorted(by: { $0.key < $1.key }) {
            for rule in byTarget[targetType] ?? [] where rule.action != .cascade {
                for record in liveRecords(rule.referringType) {
                    guard deleted[rule.referringType]?[record.id] == nil, let fields = record.fields else { continue }
                    let hits = ReferenceFields.targets(in: fields, field: rule.field, targetType: targetType)
                        .filter { ids[$0] != nil }
                    guard !hits.isEmpty else { continue }
                    switch rule.action {
                    case .deny:
                        for hit in hits {
                            guard let root = ids[hit], deniedSeen.insert(root).inserted else { continue }
                            deniedRoots.append(root)
                            if reasons.count < 3 {
                                reasons.append(
                                    "\(rule.referringType) \(record.id) refers to \(targetType) \(hit) "
                                        + "in its field \"\(rule.field)\"")
                            }
                        }
                    case .nullify:
                        if nullified[rule.referringType]?[record.id] == nil {
                            nullifiedOrder[rule.referringType, default: []].append(record.id)
                        }
                        nullified[rule.referringType, default: IDMap()][record.id, default: []].append(
                            LinkedChange.Nullification(field: rule.field, targetType: targetType, targetIDs: hits))
                    case .cascade:
                        break
                    }
                }
            }
        }
        if !deniedRoots.isEmpty {
            var error = MirrorError(
                .refused,
                "deleting \(type) \(deniedRoots.prefix(3).joined(separator: ", ")) is denied by a delete rule: "
                    + reasons.joined(separator: "; ") + ". Nothing was stored.",
                recordIDs: deniedRoots, recordType: type, scope: scope)
            error.nothingStored = true
            self = .refuse(error)
            return
        }
        var changes: [String: [LinkedChange]] = [:]
        for (recordType, ids) in order {
            changes[recordType, default: []] += ids.map(LinkedChange.delete)
        }
        for (recordType, ids) in nullifiedOrder {
            for id in ids {
                changes[recordType, default: []].append(LinkedChange(
                    recordID: id, deletes: false, nullifications: nullified[recordType]?[id] ?? []))
            }
        }
        self = .apply(changes)
    }
}
