
/// An advisory `flock` on an open file, held by one open file description: exclusive, or
/// shared with other shared holders.
///
/// Two descriptors from separate `open` calls exclude each other even in one process, so
/// two database instances opened independently on one directory serialise exactly like
/// two processes do. The lock is released when the descriptor is closed, including when
/// the process dies, so a killed writer never leaves a zone locked.
package enum FileLock {
    /// Blocks until the exclusive lock on `fd` is held (or, with `shared`, a shared one).
    ///
    /// - Returns: `0`, or the `errno` of the failure.
    package static func lock(_ fd: Int32, shared: Bool = false) -> Int32 {
        while flock(fd, shared ? LOCK_SH : LOCK_EX) != 0 {
            if errno != EINTR { return errno }
        }
        return 0
    }

    /// Takes the exclusive lock on `fd` (or, with `shared`, a shared one) if no one holds
    /// it in a conflicting way.
    ///
    /// - Returns: `0` when the lock is held, `EWOULDBLOCK` when someone else holds it, or
    ///   the `errno` of another failure.
    package static func tryLock(_ fd: Int32, shared: Bool = false) -> Int32 {
        while flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 {
            if errno != EINTR { return errno }
        }
        return 0
    }

    /// Releases the lock on `fd`.
    package static func unlock(_ fd: Int32) {
        while flock(fd, LOCK_UN) != 0 {
            if errno != EINTR { return }
        }
    }
}
