// The C library, imported once for the whole module: Glibc on Linux, Darwin on macOS.
#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Darwin)
@_exported import Darwin
#endif

/// The few system calls whose spelling differs between Linux and macOS, each written once.
enum Platform {
    /// `write(2)`, under a name no `write` method hides.
    ///
    /// - Returns: The number of bytes written, or -1 with `errno` set.
    static func write(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(fd, pointer, count)
        #elseif canImport(Darwin)
        Darwin.write(fd, pointer, count)
        #endif
    }

    /// Flushes a file to stable storage: on Linux its data (`fdatasync`), or with
    /// `metadata` its data and metadata (`fsync`); on macOS both, through the drive's cache
    /// (`F_FULLFSYNC`, or `fsync` where the file system does not support it).
    ///
    /// - Returns: 0, or -1 with `errno` set.
    static func sync(_ fd: Int32, metadata: Bool) -> Int32 {
        #if canImport(Glibc)
        metadata ? fsync(fd) : fdatasync(fd)
        #elseif canImport(Darwin)
        fcntl(fd, F_FULLFSYNC) == 0 ? 0 : fsync(fd)
        #endif
    }

    /// The wall clock now, as file times are stamped.
    static func wallClock() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }

    /// A file's modification and status-change times.
    static func times(of info: stat) -> (modified: timespec, changed: timespec) {
        #if canImport(Glibc)
        (info.st_mtim, info.st_ctim)
        #elseif canImport(Darwin)
        (info.st_mtimespec, info.st_ctimespec)
        #endif
    }

    /// From this many bytes, a buffer about to be filled is worth backing by huge pages.
    static let hugePageBufferMinimum = 4 << 20

    /// Asks the kernel to back the whole 2 MiB pages inside `count` bytes at `start` (memory
    /// not yet touched, about to be filled) by transparent huge pages, on Linux; nothing
    /// elsewhere. Advice only: the bytes are the same either way.
    ///
    /// Touched page by page, a fresh buffer takes a page fault per 4 KiB (a kernel entry, a
    /// zeroed page, a charge to the memory cgroup): about 17 ms for 16 MiB on a 2-core
    /// machine, 3 ms in huge pages. A 100,000-record batch fills about 80 MB of such
    /// buffers (its encoded fields, their copy as `Data`, its journal append).
    static func adviseHugePages(_ start: UnsafeMutableRawPointer, count: Int) {
        #if os(Linux)
        let hugePage = UInt(2 << 20)
        let first = (UInt(bitPattern: start) + hugePage - 1) & ~(hugePage - 1)
        let end = (UInt(bitPattern: start) + UInt(count)) & ~(hugePage - 1)
        guard end > first, let pointer = UnsafeMutableRawPointer(bitPattern: first) else { return }
        _ = madvise(pointer, Int(end - first), MADV_HUGEPAGE)
        #endif
    }
}
