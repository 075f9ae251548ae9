#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The system calls the JSON-file database changes the disk with, in one place, so tests
/// can make any of them fail with a chosen `errno` and count how often each ran.
///
/// Every call that creates, writes, flushes, renames, truncates or removes something goes
/// through an instance of this type; reads do not. The live behaviour is the plain system
/// call (retried on `EINTR`); an injected fault replaces it.
///
/// ```swift
/// database.fileSystem.failNext(.fsync, errno: EIO)
/// // the next commit throws MirrorError.Kind.ioFailure and stores nothing
/// ```
package final class FileSystem: Sendable {
    /// A kind of call that can be counted and made to fail.
    package enum Operation: String, Hashable, Sendable, CaseIterable {
        case open, mkdir, write, fsync, rename, truncate, unlink, link, chmod
    }

    /// A failed call: the operation and its `errno`.
    package struct Failure: Error, Sendable {
        /// The call that failed.
        package var operation: Operation
        /// Its `errno`.
        package var code: Int32
    }

    private struct Fault: Sendable {
        var operation: Operation
        /// The `errno` to fail with, or `nil` to kill the process instead.
        var code: Int32?
        /// Calls to let through before the fault fires.
        var skip: Int = 0
        var remaining: Int
        var afterBytes: Int
    }

    private let faults = Mutex<[Fault]>([])
    private let hasFaults = Atomic<Bool>(false)
    private let counters = Mutex<[Operation: Int]>([:])

    /// Creates a file system with no faults.
    package init() {}

    // MARK: Faults and counters (tests)

    /// Makes the next `times` calls of `operation` fail with `code`.
    ///
    /// - Parameters:
    ///   - operation: The call to fail.
    ///   - code: The `errno` to fail with (for example `ENOSPC`, `EIO`, `EACCES`).
    ///   - times: How many calls fail.
    ///   - afterBytes: For ``Operation/write`` only: how many bytes the failing call still
    ///     writes before it fails, to simulate a partial write.
    package func failNext(_ operation: Operation, errno code: Int32, times: Int = 1, afterBytes: Int = 0) {
        faults.withLock { faults in
            faults.append(Fault(operation: operation, code: code, remaining: times, afterBytes: afterBytes))
            hasFaults.store(true, ordering: .sequentiallyConsistent)
        }
    }

    /// Kills the process with `SIGKILL` at the `call`-th call of `operation` from now,
    /// before the call does anything (for ``Operation/write``, after writing `afterBytes`
    /// bytes): a crash at a chosen point, for crash-recovery tests run in a child process.
    package func crash(at operation: Operation, call: Int = 1, afterBytes: Int = 0) {
        faults.withLock { faults in
            faults.append(Fault(operation: operation, code: nil, skip: max(0, call - 1), remaining: 1, afterBytes: afterBytes))
            hasFaults.store(true, ordering: .sequentiallyConsistent)
        }
    }

    /// Removes every injected fault that has not fired yet.
    package func clearFaults() {
        faults.withLock { faults in
            faults.removeAll()
            hasFaults.store(false, ordering: .sequentiallyConsistent)
        }
    }

    /// How many times `operation` was called (including calls that failed).
    package func count(_ operation: Operation) -> Int {
        counters.withLock { $0[operation] ?? 0 }
    }

    /// Takes the fault for `operation`, if one is armed.
    private func fault(for operation: Operation) -> Fault? {
        counters.withLock { $0[operation, default: 0] += 1 }
        guard hasFaults.load(ordering: .relaxed) else { return nil }
        let fired = faults.withLock { faults -> Fault? in
            guard let index = faults.firstIndex(where: { $0.operation == operation }) else { return nil }
            if faults[index].skip > 0 {
                faults[index].skip -= 1
                return nil
            }
            let fault = faults[index]
            faults[index].remaining -= 1
            if faults[index].remaining <= 0 { faults.remove(at: index) }
            if faults.isEmpty { hasFaults.store(false, ordering: .sequentiallyConsistent) }
            return fault
        }
        if let fired, fired.code == nil, operation != .write { Self.die() }
        return fired
    }

    private static func die() -> Never {
        kill(getpid(), SIGKILL)
        while true { pause() }
    }

    // MARK: Calls

    /// `openat`, retried on `EINTR`.
    ///
    /// - Returns: The new file descriptor.
    package func open(at directory: Int32, _ name: String, flags: Int32, mode: mode_t = 0) throws(Failure) -> Int32 {
        if let fault = fault(for: .open) { throw Failure(operation: .open, code: fault.code ?? EIO) }
        while true {
            let fd = openat(directory, name, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw Failure(operation: .open, code: errno) }
        }
    }

    /// `mkdirat`.
    package func makeDirectory(at directory: Int32, _ name: String, mode: mode_t) throws(Failure) {
        if let fault = fault(for: .mkdir) { throw Failure(operation: .mkdir, code: fault.code ?? EIO) }
        guard mkdirat(directory, name, mode) == 0 else { throw Failure(operation: .mkdir, code: errno) }
    }

    /// Writes every byte of `buffer` at the file's current offset (the end, for a file
    /// opened with `O_APPEND`), looping over short writes.
    ///
    /// - Returns: Normally `buffer.count`.
    /// - Throws: A ``Failure``; some bytes may have been written before it.
    package func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Failure) {
        var offset = 0
        var limit = buffer.count
        var injected: Int32?
        var crashes = false
        if let fault = fault(for: .write) {
            injected = fault.code
            crashes = fault.code == nil
            limit = min(fault.afterBytes, buffer.count)
        }
        while offset < limit {
            let written = posixWrite(fd, buffer.baseAddress! + offset, limit - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure(operation: .write, code: errno)
            }
            offset += written
        }
        if crashes { Self.die() }
        if let injected { throw Failure(operation: .write, code: injected) }
    }

    /// Writes every byte of `bytes`; see ``write(_:_:)-(_,UnsafeRawBufferPointer)``.
    package func write(_ fd: Int32, bytes: [UInt8]) throws(Failure) {
        let failure = bytes.withUnsafeBytes { raw -> Failure? in
            do throws(Failure) {
                try write(fd, raw)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Flushes a file's data to stable storage (`fdatasync` on Linux, `F_FULLFSYNC` on
    /// Darwin), or, with `metadata`, its data and metadata (`fsync`; used for directories).
    package func sync(_ fd: Int32, metadata: Bool = false) throws(Failure) {
        if let fault = fault(for: .fsync) { throw Failure(operation: .fsync, code: fault.code ?? EIO) }
        while true {
            #if canImport(Glibc)
            let result = metadata ? fsync(fd) : fdatasync(fd)
            #else
            var result = fcntl(fd, F_FULLFSYNC)
            if result != 0 { result = fsync(fd) }
            #endif
            if result == 0 { return }
            if errno != EINTR { throw Failure(operation: .fsync, code: errno) }
        }
    }

    /// `renameat` within one directory.
    package func rename(at directory: Int32, _ from: String, to: String) throws(Failure) {
        if let fault = fault(for: .rename) { throw Failure(operation: .rename, code: fault.code ?? EIO) }
        guard renameat(directory, from, directory, to) == 0 else { throw Failure(operation: .rename, code: errno) }
    }

    /// `linkat` within one directory: makes `to` name the file `from` names, failing with
    /// `EEXIST` if `to` exists.
    package func link(at directory: Int32, _ from: String, to: String) throws(Failure) {
        if let fault = fault(for: .link) { throw Failure(operation: .link, code: fault.code ?? EIO) }
        guard linkat(directory, from, directory, to, 0) == 0 else { throw Failure(operation: .link, code: errno) }
    }

    /// `ftruncate`.
    package func truncate(_ fd: Int32, to length: Int) throws(Failure) {
        if let fault = fault(for: .truncate) { throw Failure(operation: .truncate, code: fault.code ?? EIO) }
        while ftruncate(fd, off_t(length)) != 0 {
            if errno != EINTR { throw Failure(operation: .truncate, code: errno) }
        }
    }

    /// `unlinkat` of a file.
    package func unlink(at directory: Int32, _ name: String) throws(Failure) {
        if let fault = fault(for: .unlink) { throw Failure(operation: .unlink, code: fault.code ?? EIO) }
        guard unlinkat(directory, name, 0) == 0 else { throw Failure(operation: .unlink, code: errno) }
    }

    /// `fchmod`.
    package func changeMode(_ fd: Int32, to mode: mode_t) throws(Failure) {
        if let fault = fault(for: .chmod) { throw Failure(operation: .chmod, code: fault.code ?? EIO) }
        guard fchmod(fd, mode) == 0 else { throw Failure(operation: .chmod, code: errno) }
    }
}

extension FileSystem.Failure {
    /// The failure as a ``MirrorError`` about `file`.
    package func mirrorError(file: String) -> MirrorError {
        MirrorError.posix(code, operation.rawValue, file: file)
    }
}

#if canImport(Glibc)
@inline(__always) private func posixWrite(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    Glibc.write(fd, pointer, count)
}
#elseif canImport(Darwin)
@inline(__always) private func posixWrite(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    Darwin.write(fd, pointer, count)
}
#endif
