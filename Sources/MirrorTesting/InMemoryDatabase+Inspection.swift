import Foundation
import MagicMirror
import Synchronization

extension InMemoryDatabase {
    /// The live records of a record type, decoded, in the order they were last changed
    /// (by the `StoredRecord.modified` clock reading of their last change, then writer
    /// and id).
    ///
    /// Reads the store directly, without latency or injected faults, so a test can check
    /// what its code stored:
    ///
    /// ```swift
    /// try await mirror.flush()
    /// #expect(try database.records(Todo.self).map(\.title) == ["Milk"])
    /// ```
    ///
    /// - Parameters:
    ///   - type: The record type; its `Recordable.recordType` names the zone.
    ///   - scope: The scope of the zone.
    ///   - user: The owner of a private zone; `nil` for a public zone.
    /// - Returns: Every live record of the zone (no tombstones).
    /// - Throws: `MirrorError.Kind.decodingFailed` naming the first stored record that does
    ///   not decode as `Record`; `MirrorError.Kind.invalidName` for a private scope without
    ///   a user, or a public one with a user.
    public func records<Record: Recordable>(
        _ type: Record.Type, scope: Scope = .public, user: MirrorUser? = nil
    ) throws(MirrorError) -> [Record] {
        let zone = try TypedRecords.zone(of: type, scope: scope, user: user)
        var records: [Record] = []
        for stored in storedRecords(in: zone) {
            records.append(try TypedRecords.decode(type, from: stored, scope: scope))
        }
        return records
    }

    /// The records of a zone as stored, in the order they were last changed (by the
    /// `StoredRecord.modified` clock reading of their last change, then writer and id).
    ///
    /// Reads the store directly, without latency or injected faults.
    ///
    /// - Parameters:
    ///   - zone: The zone.
    ///   - includingDeleted: Whether to include tombstones (deleted records whose history
    ///     was not compacted yet).
    /// - Returns: The stored records, each with its version, fields, clock reading and
    ///   writer; empty for a zone never written.
    public func storedRecords(in zone: ZoneID, includingDeleted: Bool = false) -> [StoredRecord] {
        let records = store.contents.withLock { contents -> [StoredRecord] in
            guard let state = contents.zones[zone] else { return [] }
            return includingDeleted ? Array(state.records.values) : state.liveRecords
        }
        return records.sorted { ($0.modified, $0.writer, $0.id) < ($1.modified, $1.writer, $1.id) }
    }

    /// One record of a zone as stored, live or a tombstone.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - zone: The zone.
    /// - Returns: The stored record (check `StoredRecord.isDeleted`), or `nil` when the
    ///   zone has no record with that id (or its tombstone was compacted away).
    public func storedRecord(_ id: String, in zone: ZoneID) -> StoredRecord? {
        store.contents.withLock { $0.zones[zone]?.records[id] }
    }

    /// The zones that were ever written, in no particular order.
    public var zones: [ZoneID] {
        store.contents.withLock { Array($0.zones.keys) }
    }

    /// Every commit made to the store since it was created (or since
    /// ``clearCommitLog()``), in the order they finished: by this instance, the instances
    /// made with ``writer(named:)`` and the simulated writers.
    ///
    /// Applied commits appear in the order of the tokens they produced. Failed commits
    /// (injected faults, invalid input) and commits refused by a conflict are logged too.
    /// Reads are not logged.
    ///
    /// > Important: The log keeps every operation with its fields, so it grows with every
    /// > commit. Call ``clearCommitLog()`` in long-running tests that commit a lot.
    public var commitLog: [CommitLogEntry] {
        store.contents.withLock { $0.log }
    }

    /// The commit log now, then again after every commit, as long as you iterate.
    ///
    /// Wait on it instead of polling ``commitLog``:
    ///
    /// ```swift
    /// try await database.commitLogUpdates.waitUntil(timeout: .seconds(5)) { log in
    ///     log.contains { $0.isApplied && $0.recordIDs == [item.recordID] }
    /// }
    /// ```
    ///
    /// See ``CommitLogUpdates`` for how elements are delivered.
    public var commitLogUpdates: CommitLogUpdates { CommitLogUpdates(store: store) }

    /// How many calls of ``commit(_:to:)`` are running now, on this instance and on every
    /// instance sharing its store (``writer(named:)``): started, and not returned yet. A
    /// commit waiting out its ``commitLatency`` counts.
    ///
    /// Wait on ``commitsInProgressUpdates`` to know that code under test has reached the
    /// database, for example to check what it shows while a commit is in flight.
    public var commitsInProgress: Int {
        store.contents.withLock { $0.commitsInProgress }
    }

    /// ``commitsInProgress`` now, then again each time a commit starts or ends, for as long
    /// as the sequence is iterated.
    ///
    /// Every value is delivered, in order (none is skipped, however briefly it held), so a
    /// wait for a count cannot miss it:
    ///
    /// ```swift
    /// database.commitLatency = .seconds(3600)
    /// mirror.dataModel.append(record)
    /// try await database.commitsInProgressUpdates.waitUntil(timeout: .seconds(5)) { $0 == 1 }
    /// ```
    ///
    /// Each access returns a new sequence; it stops receiving values when its iteration
    /// ends or its iterating task is cancelled.
    public var commitsInProgressUpdates: AsyncStream<Int> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let store = store
        let key = store.contents.withLock { contents in
            let key = contents.nextProgressReader
            contents.nextProgressReader += 1
            contents.progressReaders[key] = continuation
            continuation.yield(contents.commitsInProgress)
            return key
        }
        continuation.onTermination = { _ in
            _ = store.contents.withLock { $0.progressReaders.removeValue(forKey: key) }
        }
        return stream
    }

    /// How many readers of ``commitLogUpdates`` are suspended waiting for the log to
    /// change (for this package's tests: an ended iteration must leave none behind).
    package var commitLogReaderCount: Int {
        store.contents.withLock { $0.logWaiters.count }
    }

    /// Empties the ``commitLog``; the next entry has index 0 again.
    public func clearCommitLog() {
        store.contents.withLock { contents in
            contents.log.removeAll()
            contents.logChanged()
        }
    }
}
