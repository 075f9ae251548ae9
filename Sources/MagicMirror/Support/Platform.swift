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
}
