import Foundation
import MagicMirror

/// One call to ``InMemoryDatabase/commit(_:to:)`` as the database saw it: the zone, the
/// writer, the operations and what became of them.
///
/// Read them from ``InMemoryDatabase/commitLog`` (or wait on
/// ``InMemoryDatabase/commitLogUpdates``) to check what code under test committed, how
/// often it retried and which commits failed:
///
/// ```swift
/// let log = database.commitLog
/// #expect(log.filter(\.isFailed).count == 2)
/// #expect(log.last?.isApplied == true)
/// ```
///
/// Every commit is logged: applied ones, ones refused because of a conflict, and failed
/// ones (an injected fault, an invalid name or record), by this instance, by every writer
/// made with ``InMemoryDatabase/writer(named:)`` and by the simulated writers.
public struct CommitLogEntry: Sendable, CustomStringConvertible {
    /// What became of a commit.
    public enum Result: Sendable {
        /// The commit was checked against the stored records: either every operation was
        /// applied, or, when one conflicted, none was (see `CommitOutcome`).
        case completed(CommitOutcome)
        /// The commit threw; nothing was stored.
        case failed(MirrorError)
    }

    /// The position of the entry in the log, from 0.
    public var index: Int
    /// The zone committed to.
    public var zone: ZoneID
    /// The `RecordDatabase.writerID` of the instance (or simulated writer) that committed.
    public var writer: String
    /// The operations, as passed to `commit` (for a simulated change, as the simulated
    /// writer made them).
    public var operations: [RecordOperation]
    /// What became of the commit.
    public var result: Result
    /// When the commit finished.
    public var time: Date
    /// Whether the commit was made by a simulated writer (``InMemoryDatabase/simulateSave(id:fields:in:by:)``
    /// and its siblings) rather than through `commit`.
    public var isSimulated: Bool

    /// Creates an entry.
    public init(
        index: Int, zone: ZoneID, writer: String, operations: [RecordOperation], result: Result,
        time: Date, isSimulated: Bool = false
    ) {
        self.index = index
        self.zone = zone
        self.writer = writer
        self.operations = operations
        self.result = result
        self.time = time
        self.isSimulated = isSimulated
    }

    /// The outcome of a commit that completed, applied or not; `nil` for a failed one.
    public var outcome: CommitOutcome? {
        if case .completed(let outcome) = result { return outcome }
        return nil
    }

    /// The error of a failed commit; `nil` for one that completed.
    public var error: MirrorError? {
        if case .failed(let error) = result { return error }
        return nil
    }

    /// Whether the commit threw (nothing was stored).
    public var isFailed: Bool { error != nil }

    /// Whether every operation of the commit was applied.
    public var isApplied: Bool { outcome?.isApplied ?? false }

    /// Whether the commit completed but was refused because an operation conflicted.
    public var isConflict: Bool { outcome.map { !$0.isApplied } ?? false }

    /// The ids of the records the commit named, in the order of its operations.
    public var recordIDs: [String] { operations.map(\.recordID) }

    /// One line: index, zone, writer, record ids and what became of the commit.
    public var description: String {
        let what: String
        switch result {
        case .completed(let outcome) where outcome.isApplied: what = "applied → \(outcome.token)"
        case .completed: what = "conflict"
        case .failed(let error): what = "failed: \(error.kind)"
        }
        let simulated = isSimulated ? " (simulated)" : ""
        return "#\(index) \(zone) by \(writer)\(simulated): \(operations.count) operation(s) "
            + "[\(recordIDs.prefix(5).joined(separator: ", "))\(operations.count > 5 ? ", …" : "")] \(what)"
    }
}
