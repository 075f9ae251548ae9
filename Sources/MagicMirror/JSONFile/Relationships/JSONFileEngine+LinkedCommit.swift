import Dispatch
import Foundation
import Synchronization

/// Linked commits: a commit that deletes a record of a delete rule's target type, applied
/// with the changes the rules make in the other zones of its scope space as one atomic step.
///
/// Under the space's lock, then the writers' locks of every zone the rules can reach (in the
/// order of their paths, so that two processes never wait for each other), the commit is
/// checked and planned (``RelationshipPlan``). A refused plan stores nothing. A plan that
/// writes more than one zone first writes its intent (``JSONFileLinkedIntent``) to
/// `intent.ndjson.tmp`, flushes it and renames it to `intent.ndjson`; then appends each
/// zone's batch (one append each, atomic by itself); then removes the intent. A writer killed
/// in between leaves the intent, and the next writer to use the space replays it
/// (``recoverLinkedCommit(in:_:)``): batches already appended are recognised by their writer
/// and clock and skipped, the others are applied to what is stored then. So after recovery
/// the commit is all there, or, when the writer was killed before the intent was in place,
/// not there at all.
extension JSONFileEngine {
    /// Commits `operations` with the delete rules of the zone's space, when it deletes and a
    /// rule targets the zone's record type; `nil` for a plain commit.
    func linkedCommit(
        _ operations: [RecordOperation], to zone: ZoneID, durable: Bool
    ) async throws -> CommitOutcome? {
        guard operations.contains(where: { $0.action == .delete }) else { return nil }
        let space = relationships.space(of: zone, rootPath: context.rootPath)
        let mayApply = try space.state.withLock { state throws(MirrorError) -> Bool in
            try MirrorError.beforeStoring { () throws(MirrorError) in
                try space.rules(&state, context: context).contains { $0.targetType == zone.recordType }
                    || space.hasIntent(&state, context: context)
            }
        }
        guard mayApply else { return nil }
        let clock = HybridLogicalClock.shared
        clock.observe(latestOf: operations.lazy.map(\.timestamp))
        let timestamp = clock.now()
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do throws(MirrorError) {
                    continuation.resume(returning: try self.linkedCommitNow(
                        operations, to: zone, space: space, durable: durable, timestamp: timestamp))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// The blocking part of ``linkedCommit(_:to:durable:)``.
    private func linkedCommitNow(
        _ operations: [RecordOperation], to zone: ZoneID, space: JSONFileRelationships.Space, durable: Bool,
        timestamp: HLCTimestamp
    ) throws(MirrorError) -> CommitOutcome? {
        try space.state.withLock { state throws(MirrorError) -> CommitOutcome? in
            // This commit looks for an interrupted one itself, below.
            space.recovered.store(true, ordering: .releasing)
            let lockFD = try MirrorError.beforeStoring { () throws(MirrorError) in
                try space.lock(&state, context: context)
            }
            defer { FileLock.unlock(lockFD) }
            try recoverLinkedCommit(in: space, &state)
            let (rules, zones) = try MirrorError.beforeStoring {
                () throws(MirrorError) -> ([StoredDeleteRule], [JSONFileZone]) in
                let rules = try space.rules(&state, context: context)
                let types = RelationshipPlan.reachableTypes(from: zone.recordType, rules: rules)
                var zones: [JSONFileZone] = []
                for type in types { zones.append(try self.zone(try zone.sibling(type))) }
                return (rules, zones)
            }
            guard rules.contains(where: { $0.targetType == zone.recordType }),
                  let own = zones.first(where: { $0.zone == zone })
            else { return nil }

            var conflict: CommitOutcome?
            try writeLinked(zones, space: space, state: &state, durable: durable, writesIntent: true) {
                () throws(MirrorError) -> [LinkedBatch] in
                let prepared: [StoredRecord?]
                switch own.memory.withLock({ $0.prepare(operations, writer: context.writerID) }) {
                case .failure(let refused):
                    conflict = refused.outcome
                    return []
                case .success(let records):
                    prepared = records
                }
                let produced = prepared.compactMap { $0 }
                var byType: [String: JSONFileZone] = [:]
                for handle in zones { byType[handle.zone.recordType] = handle }
                let plan = RelationshipPlan(produced, type: zone.recordType, rules: rules, scope: zone.scope) { type in
                    byType[type]?.memory.withLock { $0.liveRecords } ?? []
                }
                switch plan {
                case .refuse(let error):
                    throw error
                case .apply(let changes):
                    return try MirrorError.beforeStoring { () throws(MirrorError) in
                        try LinkedBatch.batches(
                            of: zone, produced: produced, changes: changes, writer: context.writerID,
                            timestamp: timestamp)
                    }
                }
            }
            if let conflict { return conflict }
            return own.memory.withLock { state in
                CommitOutcome(
                    results: operations.compactMap { operation in
                        state.records[operation.recordID].map { CommitOutcome.Result.applied($0) }
                    },
                    token: state.token)
            }
        }
    }

    /// Replays the intent an interrupted linked commit left in `space`, with the space's lock
    /// held. An intent that cannot be read is moved aside (`intent.ndjson.corrupt`) and
    /// reported as a ``MirrorError/Kind/corruptEntry`` problem; nothing else changes.
    func recoverLinkedCommit(
        in space: JSONFileRelationships.Space, _ state: inout JSONFileRelationships.Space.State
    ) throws(MirrorError) {
        guard space.hasIntent(&state, context: context) else { return }
        let name = JSONFileRelationships.intentFile
        let bytes: [UInt8]
        do throws(FileSystem.Failure) {
            let fd = try context.fileSystem.open(at: state.directoryFD, name, flags: O_RDONLY | O_NOFOLLOW)
            defer { close(fd) }
            bytes = try JSONFileIO.readAll(fd)
        } catch {
            if error.code == ENOENT { return }
            throw error.mirrorError(file: space.path(name))
        }
        guard let intent = JSONFileLinkedIntent.decode(bytes, space: space.zone.spaceKey) else {
            let aside = name + ".corrupt"
            do throws(FileSystem.Failure) {
                try context.fileSystem.rename(at: state.directoryFD, name, to: aside)
            } catch {
                throw error.mirrorError(file: space.path(name))
            }
            context.problems.report(
                MirrorError(
                    .corruptEntry,
                    "\(space.path(name)) is not the intent of a linked commit (another program changed "
                        + "it); it was not replayed and is kept as \(aside). The zones are as they were.",
                    scope: space.zone.scope, file: space.path(name)),
                key: "intent \(space.path(name)) \(bytes.count) \(bytes.hashValue)")
            return
        }
        var zones: [JSONFileZone] = []
        for batch in intent.batches { zones.append(try zone(batch.zone)) }
        try writeLinked(zones, space: space, state: &state, durable: true, writesIntent: false) { intent.batches }
    }

    /// Locks the writers of `zones` in the order of their paths, catches each up, asks `plan`
    /// for the batches, and appends them: the linked commit's one atomic step (see above).
    ///
    /// - Parameters:
    ///   - writesIntent: Whether to write the intent first (a new commit) or only remove it at
    ///     the end (a replay).
    ///   - plan: Runs with every lock held; returns the batches (none to write nothing), or
    ///     throws to write nothing.
    private func writeLinked(
        _ zones: [JSONFileZone], space: JSONFileRelationships.Space,
        state: inout JSONFileRelationships.Space.State, durable: Bool, writesIntent: Bool,
        plan: () throws(MirrorError) -> [LinkedBatch]
    ) throws(MirrorError) {
        let ordered = zones.sorted { $0.directoryPath.utf8.lexicographicallyPrecedes($1.directoryPath.utf8) }
        var writes: [ZoneID: [[StoredRecord]]] = [:]
        var notifications: [ZoneID: [RemoteNotification]] = [:]
        var failure: MirrorError?
        var appended = 0
        var intentWritten = false
        let spaceState = state

        func lockFrom(_ index: Int) throws(MirrorError) {
            guard index < ordered.count else {
                let batches = try plan()
                var writing = 0
                for batch in batches {
                    guard let handle = ordered.first(where: { $0.zone == batch.zone }) else { continue }
                    let commits = handle.memory.withLock { state -> [[StoredRecord]] in
                        if batch.isApplied(stored: { state.records[$0] }) { return [] }
                        return batch.commits(stored: { state.records[$0] })
                    }
                    if commits.isEmpty { continue }
                    writes[batch.zone, default: []] += commits
                    writing += 1
                }
                if writesIntent, writing > 1 {
                    let bytes = try MirrorError.beforeStoring { () throws(MirrorError) in
                        try JSONFileLinkedIntent(
                            writer: context.writerID, timestamp: batches.first?.timestamp ?? .zero, batches: batches
                        ).encoded()
                    }
                    try MirrorError.beforeStoring { () throws(MirrorError) in
                        try space.replaceFile(
                            JSONFileRelationships.intentFile, temporary: JSONFileRelationships.intentTemporaryFile,
                            with: bytes, state: spaceState, context: context)
                    }
                    intentWritten = true
                }
                return
            }
            let handle = ordered[index]
            try handle.disk.withLock { disk throws(MirrorError) in
                notifications[handle.zone, default: []] += try MirrorError.beforeStoring {
                    () throws(MirrorError) -> [RemoteNotification] in
                    var caught = try handle.ensureLoaded(&disk)
                    caught += try handle.followReplacedDirectory(&disk)
                    return caught
                }
                guard let lockFD = try MirrorError.beforeStoring({ () throws(MirrorError) in
                    try handle.lockWriters(&disk, mayWait: true)
                }) else { return }
                defer { FileLock.unlock(lockFD) }
                notifications[handle.zone, default: []] += try MirrorError.beforeStoring {
                    () throws(MirrorError) in try handle.synchronize(&disk, underLock: true)
                }
                try lockFrom(index + 1)
                // Unwinding: append this zone's batch.
                guard failure == nil, let commits = writes[handle.zone], !commits.isEmpty else { return }
                // One append: its commits are read all together or not at all.
                let first = handle.memory.withLock { $0.token.sequence } + 1
                var lines = JSONFileFormat.JournalAppend(capacity: 256)
                for (offset, records) in commits.enumerated() {
                    for (position, record) in records.enumerated() {
                        lines.add(
                            sequence: first + offset, record: record,
                            isLast: offset == commits.count - 1 && position == records.count - 1)
                    }
                }
                do throws(MirrorError) {
                    try handle.append(&disk, lines.sealed(), durable: durable)
                } catch {
                    failure = error
                    return
                }
                appended += 1
                handle.memory.withLock { state in
                    for (offset, records) in commits.enumerated() {
                        state.apply(records, sequence: first + offset)
                        notifications[handle.zone, default: []] += state.notifications(
                            for: records, databaseIdentifier: context.identifier, zone: handle.zone,
                            writer: context.writerID)
                    }
                }
            }
        }

        defer {
            for handle in ordered {
                handle.deliver(notifications[handle.zone] ?? [])
                handle.catchUpIfRequested()
            }
        }
        try lockFrom(0)
        if var failure {
            if appended == 0, intentWritten {
                try? context.fileSystem.unlink(at: state.directoryFD, JSONFileRelationships.intentFile)
            }
            if appended > 0 { failure.nothingStored = false }
            throw failure
        }
        if intentWritten || !writesIntent {
            do throws(FileSystem.Failure) {
                try context.fileSystem.unlink(at: state.directoryFD, JSONFileRelationships.intentFile)
            } catch {
                // Replayed again later, which changes nothing: every batch is recognised.
                context.problems.report(
                    error.mirrorError(file: space.path(JSONFileRelationships.intentFile)),
                    key: "intent removal \(space.path) \(UUID().uuidString)")
            }
        }
    }

    /// Replays an intent an interrupted linked commit left in the space of `zone`, the first
    /// time this engine uses a zone of that space; failures are reported as problems.
    func recoverLinkedCommitsOnFirstUse(of zone: ZoneID) {
        let space = relationships.space(of: zone, rootPath: context.rootPath)
        if space.recovered.load(ordering: .acquiring) { return }
        space.state.withLock { state in
            if space.recovered.load(ordering: .acquiring) { return }
            space.recovered.store(true, ordering: .releasing)
            guard space.hasIntent(&state, context: context) else { return }
            do throws(MirrorError) {
                let lockFD = try space.lock(&state, context: context)
                defer { FileLock.unlock(lockFD) }
                try recoverLinkedCommit(in: space, &state)
            } catch {
                context.problems.report(
                    error.adding(scope: zone.scope),
                    key: "linked commit recovery \(space.path): \(error.message)")
            }
        }
    }
}
