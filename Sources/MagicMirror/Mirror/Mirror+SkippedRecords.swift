import Foundation
import Observation

// Stored records that do not decode: listing them, discarding one on purpose, refusing to
// open without them (MirrorConfiguration.undecodableRecords).

extension Mirror {
    /// The stored records of the zone that ``dataModel`` does not show because they do not
    /// decode as `Record`, in the order of their ids' bytes.
    ///
    /// Each was reported once as ``MirrorError/Kind/decodingFailed`` and is left untouched
    /// in the database. A record leaves the list when it is deleted (by another writer, or
    /// by ``discardSkippedRecord(recordID:)``) or when a version of it that decodes arrives
    /// (saved by another writer). Opening a mirror with
    /// ``MirrorConfiguration/undecodableRecords`` set to ``UndecodableRecordPolicy/fail``
    /// throws instead of skipping them.
    ///
    /// ```swift
    /// for skipped in notes.skippedRecords {
    ///     print(skipped.recordID, skipped.error.message)
    /// }
    /// ```
    ///
    /// ### Adding a record with a skipped record's id
    ///
    /// The mirror never overwrites a skipped record by itself: its stored fields are data
    /// this version of `Record` cannot read (a newer version of the app wrote them, say).
    /// Appending or inserting a record whose id is that of a skipped record is refused: the
    /// new value leaves ``dataModel`` at once, the stored record stays as it is, and the
    /// refusal is reported once as ``MirrorError/Kind/refused`` (as a `.mirrorError`
    /// notification, on ``errors()`` and as ``lastError``) naming the id; the next
    /// ``flush()`` throws it. To replace the record on purpose, discard it first:
    ///
    /// ```swift
    /// if notes.skippedRecords.contains(where: { $0.recordID == "settings" }) {
    ///     try await notes.discardSkippedRecord(recordID: "settings")   // its data is gone
    /// }
    /// notes.dataModel.append(Note(id: "settings", text: "defaults"))
    /// ```
    public var skippedRecords: [SkippedRecord] {
        registrar.access(self, keyPath: lastErrorKey)
        return core.withLock { $0.skippedRecords() }
    }

    /// Deletes a stored record that the mirror skips because it does not decode (one of
    /// ``skippedRecords``), on purpose: its data is lost for every version of the app.
    ///
    /// It is the one way to free a skipped record's id for a new record (the mirror refuses
    /// to overwrite a skipped record; see ``skippedRecords``). It returns once the deletion
    /// is committed; the record has then left ``skippedRecords``, and a record appended
    /// with its id is a new record. The database's delete rules apply, as to any delete.
    ///
    /// - Parameter recordID: The id of a record listed in ``skippedRecords``.
    /// - Throws: ``MirrorError/Kind/notFound`` when no skipped record has this id (a record
    ///   shown in ``dataModel`` is removed with `dataModel.remove(recordID:)`, not here);
    ///   ``MirrorError/Kind/conflict`` when another writer changed the record since the
    ///   mirror skipped it (nothing is deleted; the new version arrives like any change);
    ///   what the database's commit throws (``MirrorError/Kind/refused`` for a delete a
    ///   delete rule denies, an I/O kind…), and then nothing is deleted.
    public func discardSkippedRecord(recordID: String) async throws {
        let (zone, zoneSwitches, stored, shown, membership) = core.withLock { engine in
            (engine.zone, engine.zoneSwitches, engine.isSkipped(recordID) ? engine.pull[recordID] : nil,
             engine.records[recordID] != nil, engine.subscription)
        }
        guard let stored else {
            throw MirrorError(
                .notFound,
                "record \(recordID) of \(zone) is not a skipped record (Mirror.skippedRecords), so nothing was "
                    + (shown ? "discarded: it decodes and dataModel shows it; remove it with dataModel.remove(recordID:)"
                        : "discarded: no stored record with this id fails to decode"),
                recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope)
        }
        // As for every commit of the mirror's: the tokens delivered meanwhile are held for its
        // end, so that the mirror does not hear its own delete (see ZoneSubscriptions).
        membership?.beginCommit()
        var appliedToken: ChangeToken?
        defer { membership?.endCommit(upTo: appliedToken) }
        let outcome: CommitOutcome
        do {
            outcome = try await database.commit(
                [.delete(recordID, baseVersion: stored.version, timestamp: HybridLogicalClock.shared.now())], to: zone)
        } catch {
            throw mirrorError(error, while: "discarding the skipped record \(recordID)", in: zone)
                .adding(recordIDs: [recordID])
        }
        let gone: StoredRecord?
        switch outcome.results.first {
        case .applied(let tombstone)?:
            gone = tombstone
        case .conflict(let current)? where current.map(\.isDeleted) ?? true:
            // Deleted by another writer meanwhile: what was asked is done.
            gone = current
        case .conflict(let current)?:
            throw MirrorError(
                .conflict,
                "record \(recordID) of \(zone) was not discarded: another writer saved it since the mirror skipped "
                    + "it (version \(current?.version ?? 0) is stored now, not \(stored.version)). The new version "
                    + "arrives like any change; discard it again if it is still skipped",
                recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope)
        case .notApplied?, nil:
            throw MirrorError(
                .conflict, "record \(recordID) of \(zone) was not discarded: the database did not apply the delete",
                recordIDs: [recordID], recordType: zone.recordType, scope: zone.scope)
        }
        registrar.willSet(self, keyPath: lastErrorKey)
        let done = core.withLock { engine -> (Bool, SyncEngine<Record>.Effects)? in
            // After a user switch, the record belongs to a zone this mirror no longer holds.
            guard engine.zoneSwitches == zoneSwitches else { return nil }
            let pullDue = engine.skippedRecordDiscarded(gone, id: recordID, token: gone == nil ? nil : outcome.token)
            return (pullDue, engine.drain(owner: self))
        }
        registrar.didSet(self, keyPath: lastErrorKey)
        if case .applied? = outcome.results.first { appliedToken = outcome.token }
        guard let (pullDue, effects) = done else { return }
        deliver(effects)
        if pullDue { pullWakeup.signal() }
    }

    /// Throws when a stored record of a zone being opened does not decode (the
    /// ``UndecodableRecordPolicy/fail`` policy).
    static func failOpening(zone: ZoneID, records: [StoredRecord], decoded: DecodedRecords<Record>) throws {
        let failures = decoded.missing.compactMap { missing in
            missing.error.map { (id: records[missing.position].id, error: $0) }
        }
        guard let first = failures.first else { return }
        let count = failures.count == 1
            ? "a stored record of \(zone) does not decode"
            : "\(failures.count) stored records of \(zone) do not decode"
        throw MirrorError(
            .decodingFailed,
            "\(count) as \(Record.self), and the mirror does not open without them "
                + "(MirrorConfiguration.undecodableRecords is .fail): stored record \(first.id): \(first.error)",
            recordIDs: failures.map(\.id), recordType: zone.recordType, scope: zone.scope,
            underlying: StoredRecordProblem.underlying(of: first.error))
    }
}
