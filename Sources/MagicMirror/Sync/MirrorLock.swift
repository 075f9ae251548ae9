import Foundation

/// A mirror's lock and what it guards: the ``SyncEngine``, and the records lent out of it
/// while a mutation of `dataModel` runs.
///
/// Unlike `Mutex`, it can stay locked across the `yield` of a `_modify` accessor:
/// `Mirror.dataModel` holds it while the caller mutates the array in place, so that other
/// threads wait instead of seeing a half-made change. It is recursive, and the array being
/// mutated is kept apart from the engine (``lent``), so that the same thread can read the
/// mirror's other state from inside that mutation (``Mirror/pendingChanges`` in a
/// `removeAll(where:)` predicate, say); reading the records themselves there stops the
/// program with a clear message (``ShownRecords/overlappingAccess``).
final class MirrorLock<Record: Recordable>: @unchecked Sendable {
    // @unchecked Sendable: `engine` and `lent` are only read or written with `recursiveLock`
    // held (`withLock`, and `Mirror.dataModel`'s `_modify`, which locks before touching them).
    private let recursiveLock = NSRecursiveLock()
    /// The engine. Touch it only between ``lock()`` and ``unlock()``.
    var engine: SyncEngine<Record>
    /// The records a `_modify` of `dataModel` has yielded, lent out of the engine; empty
    /// otherwise. Touch it only between ``lock()`` and ``unlock()``.
    var lent = RecordArray<Record>()

    init(_ engine: SyncEngine<Record>) { self.engine = engine }

    func lock() { recursiveLock.lock() }
    func unlock() { recursiveLock.unlock() }

    /// Runs `body` with the lock held.
    func withLock<Result>(_ body: (inout SyncEngine<Record>) throws -> Result) rethrows -> Result {
        recursiveLock.lock()
        defer { recursiveLock.unlock() }
        return try body(&engine)
    }

    /// Takes the lent records back, leaving ``lent`` empty (so that they are not copied).
    func takeLent() -> RecordArray<Record> {
        var taken = RecordArray<Record>()
        swap(&taken, &lent)
        return taken
    }
}
