import MagicMirror
import Synchronization

/// A file system for the package's tests: every call goes to ``FileSystem/live`` unless
/// a fault armed here fires, and every call is counted.
///
/// Open a database on its ``fileSystem``, then arm faults at any time. A fault fails the
/// next calls of one operation with a chosen `errno` (``failNext(_:errno:times:afterBytes:)``)
/// or kills the process with `SIGKILL` at a chosen call (``crash(at:call:afterBytes:)``, for
/// crash tests run in a child process).
///
/// ```swift
/// let faulty = FaultyFileSystem()
/// let database = try JSONFileDatabase(isolatedDirectory: url, fileSystem: faulty.fileSystem)
/// faulty.failNext(.fsync, errno: EIO)
/// // the next commit throws MirrorError.Kind.ioFailure and stores nothing
/// ```
///
/// Not API: the JSON-file database's file-system seam is internal to this package.
package final class FaultyFileSystem: Sendable {
    private struct Fault {
        var operation: FileSystem.Operation
        /// The `errno` to fail with, or `nil` to kill the process instead.
        var code: Int32?
        /// Calls to let through before the fault fires.
        var skip: Int
        /// Calls it still fails.
        var remaining: Int
        /// For writes: how many bytes the failing call writes first.
        var afterBytes: Int
    }

    private struct State {
        var faults: [Fault] = []
        var counts: [FileSystem.Operation: Int] = [:]
    }

    private let state = Mutex(State())

    /// Creates a file system with no faults.
    package init() {}

    /// Makes the next `times` calls of `operation` fail with `code`.
    ///
    /// - Parameters:
    ///   - operation: The call to fail.
    ///   - code: The `errno` to fail with (for example `ENOSPC`, `EIO`, `EACCES`).
    ///   - times: How many calls fail.
    ///   - afterBytes: For ``FileSystem/Operation/write`` only: how many bytes the failing
    ///     call still writes before it fails, to simulate a partial write.
    ///   - skipping: How many calls of `operation` succeed before the first that fails.
    package func failNext(
        _ operation: FileSystem.Operation, errno code: Int32, times: Int = 1, afterBytes: Int = 0, skipping: Int = 0
    ) {
        arm(Fault(operation: operation, code: code, skip: skipping, remaining: times, afterBytes: afterBytes))
    }

    /// Kills the process with `SIGKILL` at the `call`-th call of `operation` from now,
    /// before the call does anything (for ``FileSystem/Operation/write``, after writing
    /// `afterBytes` bytes): a crash at a chosen point, for crash-recovery tests run in a
    /// child process.
    package func crash(at operation: FileSystem.Operation, call: Int = 1, afterBytes: Int = 0) {
        arm(Fault(operation: operation, code: nil, skip: max(0, call - 1), remaining: 1, afterBytes: afterBytes))
    }

    /// How many times `operation` was called (including calls that failed).
    package func count(_ operation: FileSystem.Operation) -> Int {
        state.withLock { $0.counts[operation] ?? 0 }
    }

    /// The file system to open a database with: the live calls behind this one's faults.
    package var fileSystem: FileSystem {
        let live = FileSystem.live
        return FileSystem(
            openFile: { directory, name, flags, mode throws(FileSystem.Failure) -> Int32 in
                try self.enter(.open)
                return try live.openFile(directory, name, flags, mode)
            },
            makeDirectoryFile: { directory, name, mode throws(FileSystem.Failure) in
                try self.enter(.mkdir)
                try live.makeDirectoryFile(directory, name, mode)
            },
            writeBytes: { fd, buffer throws(FileSystem.Failure) in
                guard let fault = self.fire(.write) else { return try live.writeBytes(fd, buffer) }
                // A partial write: the first bytes land, then the call fails or the process dies.
                try live.writeBytes(fd, UnsafeRawBufferPointer(rebasing: buffer.prefix(fault.afterBytes)))
                guard let code = fault.code else { Self.die() }
                throw FileSystem.Failure(operation: .write, code: code)
            },
            syncFile: { fd, metadata throws(FileSystem.Failure) in
                try self.enter(.fsync)
                try live.syncFile(fd, metadata)
            },
            renameFile: { directory, from, to throws(FileSystem.Failure) in
                try self.enter(.rename)
                try live.renameFile(directory, from, to)
            },
            linkFile: { directory, from, to throws(FileSystem.Failure) in
                try self.enter(.link)
                try live.linkFile(directory, from, to)
            },
            truncateFile: { fd, length throws(FileSystem.Failure) in
                try self.enter(.truncate)
                try live.truncateFile(fd, length)
            },
            unlinkFile: { directory, name throws(FileSystem.Failure) in
                try self.enter(.unlink)
                try live.unlinkFile(directory, name)
            },
            changeFileMode: { fd, mode throws(FileSystem.Failure) in
                try self.enter(.chmod)
                try live.changeFileMode(fd, mode)
            })
    }

    private func arm(_ fault: Fault) {
        state.withLock { $0.faults.append(fault) }
    }

    /// Before a call other than a write: fails it or kills the process when a fault fires.
    private func enter(_ operation: FileSystem.Operation) throws(FileSystem.Failure) {
        guard let fault = fire(operation) else { return }
        guard let code = fault.code else { Self.die() }
        throw FileSystem.Failure(operation: operation, code: code)
    }

    /// Counts a call of `operation` and takes the first fault armed for it, if it fires now.
    private func fire(_ operation: FileSystem.Operation) -> Fault? {
        state.withLock { state -> Fault? in
            state.counts[operation, default: 0] += 1
            guard let index = state.faults.firstIndex(where: { $0.operation == operation }) else { return nil }
            if state.faults[index].skip > 0 {
                state.faults[index].skip -= 1
                return nil
            }
            let fault = state.faults[index]
            state.faults[index].remaining -= 1
            if state.faults[index].remaining <= 0 { state.faults.remove(at: index) }
            return fault
        }
    }

    private static func die() -> Never {
        kill(getpid(), SIGKILL)
        while true { pause() }
    }
}
