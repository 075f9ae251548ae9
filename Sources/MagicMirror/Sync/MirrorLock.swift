import Foundation

/// A value guarded by a recursive lock that, unlike `Mutex`, can stay locked across the
/// `yield` of a `_modify` accessor.
///
/// `Mirror.dataModel` holds it while the caller mutates the array in place, so that other
/// threads wait instead of seeing a half-made change, and it is recursive so that the same
/// thread reading the mirror inside that mutation meets a clear precondition failure
/// instead of a deadlock.
final class MirrorLock<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` and `isYielded` are only read or written with `recursiveLock` held (every accessor
    // below, and `Mirror.dataModel`'s `_modify`, which locks before touching it).
    private let recursiveLock = NSRecursiveLock()
    /// The guarded value. Touch it only between ``lock()`` and ``unlock()``.
    var value: Value
    /// Set while a `_modify` accessor has yielded part of ``value``; only touched with the
    /// lock held. Kept apart from ``value`` so that checking it is not itself an overlapping
    /// access.
    var isYielded = false

    init(_ value: Value) { self.value = value }

    func lock() { recursiveLock.lock() }
    func unlock() { recursiveLock.unlock() }

    /// Runs `body` with the lock held.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        recursiveLock.lock()
        defer { recursiveLock.unlock() }
        return try body(&value)
    }
}
