import Foundation
import MagicMirror

extension InMemoryDatabase {
    /// The writer id the simulated changes carry unless you name another.
    public static let simulatedWriterID = "simulated-writer"

    /// Saves a record as another process or user would: creates it, or replaces the
    /// stored version whatever it is.
    ///
    /// The change goes through the same path as ``commit(_:to:)``: the record's version
    /// grows by one, the zone's token moves forward, the commit is logged (marked
    /// ``CommitLogEntry/isSimulated``) and every subscription of the zone, on every
    /// instance sharing this store, gets a `RemoteNotification` (`.created` or
    /// `.updated`) carrying `writer` before the call returns. The save is based on the
    /// stored version, so it never conflicts; faults injected into this instance do not
    /// apply to it.
    ///
    /// For example, check that a mirror picks up another writer's change:
    ///
    /// ```swift
    /// var edited = mirror.dataModel[0]
    /// edited.title = "Changed elsewhere"
    /// try await database.simulateSave(edited)
    /// ```
    ///
    /// - Parameters:
    ///   - record: The record to save, in the zone of its `Recordable.recordType`.
    ///   - scope: The scope of the zone.
    ///   - user: The owner of a private zone; `nil` for a public zone.
    ///   - writer: The writer id the change carries.
    /// - Returns: The record as stored now.
    /// - Throws: A `MirrorError`: `MirrorError.Kind.invalidName` for an invalid record id,
    ///   record type or user (or a private scope without a user),
    ///   `MirrorError.Kind.encodingFailed` when the record does not encode as a JSON
    ///   object. Nothing is stored then.
    @discardableResult
    public func simulateSave<Record: Recordable>(
        _ record: Record, scope: Scope = .public, user: MirrorUser? = nil,
        by writer: String = InMemoryDatabase.simulatedWriterID
    ) async throws(MirrorError) -> StoredRecord {
        let zone = try TypedRecords.zone(of: Record.self, scope: scope, user: user)
        let fields = try TypedRecords.encode(record, scope: scope)
        return try await simulateSave(id: record.recordID, fields: fields, in: zone, by: writer)
    }

    /// Saves raw fields as another process or user would; see
    /// ``simulateSave(_:scope:user:by:)``.
    ///
    /// Use it to store what your type cannot produce, for example a record written by an
    /// older or newer version of the app, to check how your code copes with it.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - fields: The record's fields: the UTF-8 bytes of a JSON object.
    ///   - zone: The zone to save it in.
    ///   - writer: The writer id the change carries.
    /// - Returns: The record as stored now.
    /// - Throws: `MirrorError.Kind.invalidName` for an invalid id or zone,
    ///   `MirrorError.Kind.invalidRecord` when `fields` is not a JSON object. Nothing is
    ///   stored then.
    @discardableResult
    public func simulateSave(
        id: String, fields: Data, in zone: ZoneID, by writer: String = InMemoryDatabase.simulatedWriterID
    ) async throws(MirrorError) -> StoredRecord {
        try simulate(.save(id, fields: fields, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()),
                     in: zone, by: writer)
    }

    /// Deletes a record as another process or user would.
    ///
    /// The same path as ``simulateSave(_:scope:user:by:)``: the record's tombstone takes
    /// the next version, the token moves forward, the commit is logged, and every
    /// subscription of the zone gets a `.deleted` `RemoteNotification` before the call
    /// returns.
    ///
    /// - Parameters:
    ///   - record: The record to delete (only its `Recordable.recordID` matters).
    ///   - scope: The scope of the zone.
    ///   - user: The owner of a private zone; `nil` for a public zone.
    ///   - writer: The writer id the change carries.
    /// - Returns: The tombstone as stored now.
    /// - Throws: `MirrorError.Kind.notFound` when no live record has that id (a likely
    ///   mistake in the test), `MirrorError.Kind.invalidName` for an invalid name.
    @discardableResult
    public func simulateDelete<Record: Recordable>(
        _ record: Record, scope: Scope = .public, user: MirrorUser? = nil,
        by writer: String = InMemoryDatabase.simulatedWriterID
    ) async throws(MirrorError) -> StoredRecord {
        let zone = try TypedRecords.zone(of: Record.self, scope: scope, user: user)
        return try await simulateDelete(id: record.recordID, in: zone, by: writer)
    }

    /// Deletes the record with an id as another process or user would; see
    /// ``simulateDelete(_:scope:user:by:)``.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - zone: The zone it is stored in.
    ///   - writer: The writer id the change carries.
    /// - Returns: The tombstone as stored now.
    /// - Throws: `MirrorError.Kind.notFound` when no live record has that id,
    ///   `MirrorError.Kind.invalidName` for an invalid name.
    @discardableResult
    public func simulateDelete(
        id: String, in zone: ZoneID, by writer: String = InMemoryDatabase.simulatedWriterID
    ) async throws(MirrorError) -> StoredRecord {
        try simulate(.delete(id, baseVersion: 0, timestamp: HybridLogicalClock.shared.now()),
                     in: zone, by: writer)
    }

    /// Commits one operation as `writer`, based on the stored version.
    private func simulate(
        _ operation: RecordOperation, in zone: ZoneID, by writer: String
    ) throws(MirrorError) -> StoredRecord {
        do {
            try ZoneState.validate([operation], zone: zone)
        } catch {
            store.logFailure(error, zone: zone, writer: writer, operations: [operation], simulated: true)
            throw error
        }
        let deleting = if case .delete = operation.action { true } else { false }
        let (outcome, _) = try store.perform(
            [operation], to: zone, writer: writer, databaseIdentifier: identifier, simulated: true,
            rebase: true
        ) { state throws(MirrorError) in
            guard deleting, state.records[operation.recordID]?.isDeleted ?? true else { return }
            throw MirrorError(
                .notFound, "simulateDelete: there is no record \(operation.recordID) in \(zone) to delete",
                recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
        }
        guard case .applied(let stored) = outcome.results.first else {
            // Unreachable: the operation is based on the stored version under the same lock.
            throw MirrorError(
                .conflict, "the simulated change of \(operation.recordID) was not applied: \(outcome.results)",
                recordIDs: [operation.recordID], recordType: zone.recordType, scope: zone.scope)
        }
        return stored
    }
}
