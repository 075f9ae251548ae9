import Foundation
import Synchronization

extension Mirror {
    /// Stores every record of an older schema version in the type's current version.
    ///
    /// A mirror reads older records without this: it migrates each one in memory as it
    /// loads it, and stores the migrated form when it saves the record. Call this method
    /// when you want the stored records themselves up to date, for example once no older
    /// version of your app runs any more (an older version cannot read a record whose fields
    /// were renamed or retyped; it keeps reading records that only gained fields).
    ///
    /// It is safe to call from several processes at once, and to interrupt:
    ///
    /// - Each record is rewritten only if it is still the version that was read, so when
    ///   several processes migrate at once every record is rewritten exactly once; the
    ///   others skip it without a conflict or an error.
    /// - A record another writer changed meanwhile is skipped too (it is migrated the next
    ///   time). So is a record that does not decode after migration: it stays untouched and
    ///   is reported by the mirror as ``MirrorError/Kind/decodingFailed``.
    /// - The records are rewritten in batches, each committed atomically; a process killed
    ///   midway leaves every record either old or migrated, and calling this again finishes
    ///   the job.
    ///
    /// A mirror with a cipher (``MirrorConfiguration/cipher``) also stores again every record
    /// that is not sealed, or sealed with another key than the cipher's
    /// ``RecordCipher/sealingKeyID``: after a key rotation, this seals every record with the
    /// new key.
    ///
    /// The rewrite carries the clock reading of the change it migrates, plus one tick: in
    /// every conflict policy, an edit made after reading the record is later than its
    /// migration.
    ///
    /// ```swift
    /// let todos = try await Mirror<Todo>(database: database)
    /// let migrated = try await todos.migrateStoredRecords()
    /// ```
    ///
    /// - Returns: The number of records this call rewrote.
    /// - Throws: Whatever the database throws while reading or committing; the batches
    ///   committed before the failure stay migrated.
    @discardableResult
    public func migrateStoredRecords() async throws -> Int {
        guard schema.currentVersion > 1 || schema.sealer != nil else { return 0 }
        let zone = self.zone
        let set = try await database.fetchAll(in: zone)
        let older = set.records.filter { record in
            guard let fields = record.fields else { return false }
            return schema.storedVersion(of: fields) < schema.currentVersion || schema.needsSealing(fields)
        }
        let batchSize = max(core.withLock { $0.configuration.maximumBatchSize }, 1)
        var rewritten = 0
        var start = older.startIndex
        while start < older.endIndex {
            let end = min(start + batchSize, older.endIndex)
            rewritten += try await rewrite(older[start..<end], in: zone)
            start = end
        }
        return rewritten
    }

    /// Commits the migrated form of `records` based on their versions, leaving out those
    /// that do not decode after migration or that another writer changed meanwhile.
    private func rewrite(_ records: ArraySlice<StoredRecord>, in zone: ZoneID) async throws -> Int {
        // A record the mirror shows from this very stored version decoded already.
        let shown = core.withLock { engine in
            IDSet(records.filter { record in
                engine.pull[record.id]?.version == record.version && engine.records[record.id] != nil
                    && !engine.queue.hasChange(for: record.id)
            }.map(\.id))
        }
        var migrated: [StoredRecord] = []
        var unchecked: [StoredRecord] = []
        migrated.reserveCapacity(records.count)
        for record in records {
            guard let fields = record.fields, let current = try? schema.sealed(schema.migrate(fields)) else { continue }
            var copy = record
            copy.fields = current
            if shown.contains(record.id) { migrated.append(copy) } else { unchecked.append(copy) }
        }
        for (record, result) in zip(unchecked, schema.decodeInOrder(unchecked)) {
            if case .success? = result { migrated.append(record) }
        }
        var operations = migrated.map { record in
            RecordOperation.save(
                record.id, fields: record.fields!, baseVersion: record.version,
                timestamp: HLCTimestamp(millis: record.modified.millis, counter: record.modified.counter &+ 1))
        }
        let subscription = core.withLock { $0.subscription }
        while !operations.isEmpty {
            // The tokens delivered meanwhile are held for the commit's end (ZoneSubscriptions).
            subscription?.beginCommit()
            let outcome: CommitOutcome
            do {
                outcome = try await database.commit(operations, to: zone)
            } catch {
                subscription?.endCommit(upTo: nil)
                throw error
            }
            if outcome.isApplied {
                let pullDue = core.withLock { engine in
                    // The rewrite stores what the mirror shows: a pull need not decode it again.
                    for case .applied(let stored) in outcome.results
                    where engine.pull[stored.id]?.version == stored.version - 1 && engine.records[stored.id] != nil {
                        engine.pull.replace(stored)
                    }
                    return engine.hint(outcome.token)
                }
                if pullDue { pullWakeup.signal() }
                subscription?.endCommit(upTo: outcome.token)
                return operations.count
            }
            subscription?.endCommit(upTo: nil)
            // Changed by another writer since it was read (migrated by another process, or
            // edited): leave it; commit the rest.
            operations = zip(operations, outcome.results).compactMap { operation, result in
                if case .conflict = result { return nil }
                return operation
            }
        }
        return 0
    }
}
