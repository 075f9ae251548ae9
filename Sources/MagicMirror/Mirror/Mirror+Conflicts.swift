import Foundation

// Settling a conflict between a local change and the record as another writer stored it.
// Runs on the background task, outside the mirror's lock (a custom policy is user code).

extension Mirror {
    typealias Resolution = SyncEngine<Record>.Resolution

    /// Decides what to do with a local change whose commit conflicted, on open fields (see
    /// Mirror+Sealing.swift: `resolve` opens a sealed conflict, calls this and seals the result).
    func resolveOpened(
        _ conflict: SyncEngine<Record>.Conflict, policy: ConflictPolicy<Record>, writerID: String, in zone: ZoneID
    ) -> Resolution {
        let entry = conflict.entry
        let current = conflict.current

        // The stored record is this mirror's own earlier attempt (a commit that threw after
        // storing it): base the change on it, without merging.
        if let current, current.writer == writerID, entry.earlierTimestamps.contains(current.modified) {
            guard let value = entry.value else { return .delete(base: current) }
            return save(value, fields: entry.resolvedFields, base: current, recordID: entry.recordID, in: zone)
        }

        guard let local = entry.value else {
            // A local delete wins over a concurrent edit; two deletes agree.
            if let current, !current.isDeleted { return .delete(base: current) }
            return .keepStored(current, decoded: nil, problem: nil)
        }

        guard let current, let remoteFields = current.fields else {
            // Deleted elsewhere. A record this mirror created anew is created again; an
            // edit of a deleted record loses (a delete wins).
            if entry.isCreation {
                return save(local, fields: entry.resolvedFields, base: current, recordID: entry.recordID, in: zone)
            }
            return .keepStored(current, decoded: nil, problem: nil)
        }

        // A record created here met a stored record with its id that does not decode: data
        // this version of `Record` cannot read (another version of the app wrote it), which
        // no policy may overwrite unseen, and the local value must not be lost either. The
        // change is held and reported; see `Mirror.skippedRecords` for the ways out.
        if entry.isCreation, case .failure(let problem) = Result(catching: { try schema.decode(remoteFields) }) {
            return .hold(MirrorError(
                .conflict,
                "the new record \(entry.recordID) of \(zone) was not saved: a stored record with this id, saved "
                    + "by another writer, does not decode as \(Record.self) (\(problem)), and saving would overwrite "
                    + "data this version of \(Record.self) cannot read. The change stays pending and the stored "
                    + "record is kept. To keep the stored record, call discardPendingChange(recordID:) (it is then "
                    + "listed in Mirror.skippedRecords); to replace it on purpose, call discardPendingChange(recordID:), "
                    + "then discardSkippedRecord(recordID:), and add the record again",
                recordIDs: [entry.recordID], recordType: zone.recordType, scope: zone.scope,
                underlying: StoredRecordProblem.underlying(of: problem)))
        }

        // Every side in the mirror's schema version, so that a migrated field compares
        // equal to the stored one it came from; the local side keeps the fields its base
        // had that the type does not know.
        let localFields: Data
        do {
            localFields = try entry.resolvedFields ?? schema.fields(for: local, over: entry.base?.fields)
        } catch {
            return .hold(encodingError(entry.recordID, error, in: zone))
        }
        let remoteCurrent = (try? schema.migrate(remoteFields)) ?? remoteFields
        let localIsLater = (entry.timestamp, writerID) > (current.modified, current.writer)

        switch policy.strategy {
        case .serverWins:
            return keepStored(current)
        case .lastWriterWins:
            // The later writer's record, with the stored fields the type does not know.
            guard localIsLater else { return keepStored(current) }
            if let resolved = entry.resolvedFields {
                return .save(fields: schema.fields(resolved, over: remoteFields), value: local, base: current)
            }
            return save(local, fields: nil, base: current, recordID: entry.recordID, in: zone)
        case .changedKeys:
            let baseFields = entry.base.flatMap(\.fields).map { (try? schema.migrate($0)) ?? $0 }
            if let merged = JSONFieldMerge.merge(
                base: baseFields, local: localFields, remote: remoteCurrent, localIsLater: localIsLater),
               let value = try? schema.decode(merged)
            {
                if merged == remoteCurrent || JSONFieldMerge.members(of: merged) == JSONFieldMerge.members(of: remoteCurrent) {
                    return .keepStored(current, decoded: value, problem: nil)
                }
                return .save(fields: schema.fields(merged, over: remoteFields), value: value, base: current)
            }
            // The merge does not decode as Record: the later writer's whole record wins.
            return localIsLater
                ? .save(fields: schema.fields(localFields, over: remoteFields), value: local, base: current)
                : keepStored(current)
        case .custom(let decide):
            let remote: Record
            do {
                remote = try schema.decode(remoteFields)
            } catch {
                return .hold(MirrorError(
                    .decodingFailed,
                    "stored record \(current.id) does not decode as "
                        + "\(Record.self) (\(error)), so the custom conflict policy cannot settle the local "
                        + "change; it stays pending",
                    recordIDs: [current.id], recordType: zone.recordType, scope: zone.scope,
                    underlying: StoredRecordProblem.underlying(of: error)))
            }
            let base = entry.base.flatMap(\.fields).flatMap { try? schema.decode($0) }
            let chosen = decide(base, local, remote)
            guard IDKey.same(chosen.recordID, entry.recordID) else {
                return .hold(MirrorError(
                    .invalidRecord,
                    "the custom conflict policy returned record \(chosen.recordID) for record \(entry.recordID)",
                    recordIDs: [entry.recordID], recordType: zone.recordType, scope: zone.scope))
            }
            if chosen == remote { return .keepStored(current, decoded: remote, problem: nil) }
            return save(chosen, fields: nil, base: current, recordID: entry.recordID, in: zone)
        }
    }

    private func save(_ value: Record, fields: Data?, base: StoredRecord?, recordID: String, in zone: ZoneID) -> Resolution {
        do {
            // Over the stored record: the fields the type does not know stay.
            return .save(fields: try fields ?? schema.fields(for: value, over: base?.fields), value: value, base: base)
        } catch {
            return .hold(encodingError(recordID, error, in: zone))
        }
    }

    /// Drops the local change and shows `current` (decoded here, outside the lock), or no
    /// record when it is `nil` or deleted.
    func keepStored(_ current: StoredRecord?) -> Resolution {
        guard let fields = current?.fields else { return .keepStored(current, decoded: nil, problem: nil) }
        do {
            return .keepStored(current, decoded: try schema.decode(fields), problem: nil)
        } catch {
            return .keepStored(current, decoded: nil, problem: error)
        }
    }
}
