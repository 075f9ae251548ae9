import Foundation

/// Small read-side helpers of the JSON-file database (writes go through ``FileSystem``).
enum JSONFileIO {
    /// The identity and size of a file.
    struct FileInfo: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int
        var mode: mode_t
        var isSymbolicLink: Bool
        var isDirectory: Bool

        var identity: Identity { Identity(device: device, inode: inode) }
    }

    /// Which file a descriptor or name is: its device and inode.
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    /// The identity of an open file; `nil` for a negative descriptor or when it cannot be read.
    static func identity(_ fd: Int32) -> Identity? {
        guard fd >= 0, let info = info(fd) else { return nil }
        return info.identity
    }

    /// `fstat` of an open file, or `nil` with `errno` set.
    static func info(_ fd: Int32) -> FileInfo? {
        #if canImport(Glibc)
        return info(fd, statx: Statx.function)
        #else
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return FileInfo(status)
        #endif
    }

    #if canImport(Glibc)
    /// ``info(_:)`` through `statx`, when there is one; `fstat` when there is none or it
    /// was refused.
    static func info(_ fd: Int32, statx: Statx.Function?) -> FileInfo? {
        if let statx {
            if let info = Statx.info(statx, fd, "", Statx.emptyPath) { return info }
            if !Statx.wasRefused { return nil }
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return FileInfo(status)
    }
    #endif

    /// `fstatat` without following a final symbolic link, or `nil` with `errno` set.
    static func info(at directory: Int32, _ name: String) -> FileInfo? {
        #if canImport(Glibc)
        if let statx = Statx.function {
            if let info = Statx.info(statx, directory, name, AT_SYMLINK_NOFOLLOW) { return info }
            if !Statx.wasRefused { return nil }
        }
        #endif
        var status = stat()
        guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return FileInfo(status)
    }

    #if canImport(Glibc)
    /// `statx` asking for the type, mode, inode and size only, not the times.
    ///
    /// Linux 6.13 and later stamp a file's times finely once they have been read (multigrain
    /// timestamps): after an `fstat`, the next write changes the file's inode, and an
    /// `fdatasync` that would have written data only writes the inode too (measured here
    /// over existing bytes: 280 µs instead of 180 µs). A `statx` that does not ask for the
    /// times does not read them, so neither this process nor a reader in another one adds
    /// that to a writer's flush. Glibc declares `statx` only under `_GNU_SOURCE`, so it is
    /// looked up by name; where it is missing, `fstat` serves.
    enum Statx {
        typealias Function = @convention(c) (
            Int32, UnsafePointer<CChar>, Int32, UInt32, UnsafeMutableRawPointer
        ) -> Int32

        static let function: Function? = {
            guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "statx") else { return nil }
            return unsafeBitCast(symbol, to: Function.self)
        }()

        /// `AT_EMPTY_PATH` (a GNU flag): the descriptor itself.
        static let emptyPath: Int32 = 0x1000

        /// `STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE`.
        static let mask: UInt32 = 0x0001 | 0x0002 | 0x0100 | 0x0200

        static func info(_ statx: Function, _ directory: Int32, _ path: String, _ flags: Int32) -> FileInfo? {
            // `struct statx` is 256 bytes; its layout is the kernel's ABI.
            withUnsafeTemporaryAllocation(byteCount: 256, alignment: 8) { buffer -> FileInfo? in
                let base = buffer.baseAddress!
                guard statx(directory, path, flags, mask, base) == 0 else { return nil }
                let mode = mode_t(base.load(fromByteOffset: 28, as: UInt16.self))
                let major = base.load(fromByteOffset: 136, as: UInt32.self)
                let minor = base.load(fromByteOffset: 140, as: UInt32.self)
                return FileInfo(
                    device: deviceNumber(major: major, minor: minor),
                    inode: base.load(fromByteOffset: 32, as: UInt64.self),
                    size: Int(base.load(fromByteOffset: 40, as: UInt64.self)),
                    mode: mode & 0o7777,
                    isSymbolicLink: mode & S_IFMT == S_IFLNK,
                    isDirectory: mode & S_IFMT == S_IFDIR)
            }
        }

        /// After a failed call, whether the call itself was refused, so that `fstat` must
        /// answer instead: `ENOSYS`, or `EPERM` from a seccomp filter that does not know
        /// `statx` (as older container runtimes have).
        static var wasRefused: Bool { errno == ENOSYS || errno == EPERM }

        /// `st_dev` as glibc's `makedev` encodes a major and minor number.
        static func deviceNumber(major: UInt32, minor: UInt32) -> UInt64 {
            let major = UInt64(major)
            let minor = UInt64(minor)
            return (major & 0x0000_0fff) << 8 | (major & 0xffff_f000) << 32 | (minor & 0x0000_00ff)
                | (minor & 0xffff_ff00) << 12
        }
    }
    #endif

    /// Reads `count` bytes at `offset` (fewer if the file is shorter).
    static func read(_ fd: Int32, from offset: Int, count: Int) throws(FileSystem.Failure) -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let done = try bytes.withUnsafeMutableBytes { raw in
            Result { () throws(FileSystem.Failure) in try read(fd, into: raw, at: offset) }
        }.get()
        if done < count { bytes.removeLast(count - done) }
        return bytes
    }

    /// Reads `count` bytes at `offset` (fewer if the file is shorter) into memory of their
    /// own (see ``FileBytes``).
    static func readBytes(_ fd: Int32, from offset: Int, count: Int) throws(FileSystem.Failure) -> FileBytes {
        let bytes = FileBytes(capacity: count)
        bytes.count = try read(fd, into: UnsafeMutableRawBufferPointer(start: bytes.base, count: count), at: offset)
        return bytes
    }

    /// Fills `buffer` with the file's bytes from `offset`, or fewer where the file ends.
    ///
    /// - Returns: How many bytes it read.
    static func read(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(FileSystem.Failure) -> Int {
        var done = 0
        while done < buffer.count {
            let got = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if got < 0 {
                if errno == EINTR { continue }
                throw FileSystem.Failure(operation: .open, code: errno)
            }
            if got == 0 { break }
            done += got
        }
        return done
    }

    /// Reads a whole file.
    static func readAll(_ fd: Int32) throws(FileSystem.Failure) -> [UInt8] {
        guard let info = info(fd) else { throw FileSystem.Failure(operation: .open, code: errno) }
        return try read(fd, from: 0, count: info.size)
    }
}

extension JSONFileIO.FileInfo {
    init(_ status: stat) {
        device = UInt64(truncatingIfNeeded: status.st_dev)
        inode = UInt64(truncatingIfNeeded: status.st_ino)
        size = Int(status.st_size)
        mode = status.st_mode & 0o7777
        isSymbolicLink = status.st_mode & S_IFMT == S_IFLNK
        isDirectory = status.st_mode & S_IFMT == S_IFDIR
    }
}

/// Bytes read from a file; from ``mappedFrom`` bytes on, in memory mapped for them alone
/// and unmapped when the value goes, rather than allocated by `malloc`.
///
/// Freeing a block that large through `malloc` raises glibc's threshold for mapping blocks
/// to its size, after which smaller blocks come from the heap and stay resident once freed:
/// reading a journal of 100,000 records (31 MB) on open that way raised the open's peak by
/// 3 MiB, memory freed by then but still held.
final class FileBytes {
    /// From this many bytes, the bytes are in memory mapped for them alone.
    static let mappedFrom = 1 << 20
    /// The first byte (a valid address when empty).
    let base: UnsafeMutableRawPointer
    /// How many bytes were read.
    var count = 0
    private let capacity: Int
    /// Whether the bytes are in memory mapped for them alone.
    let isMapped: Bool

    /// Room for `capacity` bytes (`count` is 0 until some are read).
    init(capacity: Int) {
        self.capacity = capacity
        if capacity >= Self.mappedFrom {
            #if canImport(Darwin)
            let flags = MAP_PRIVATE | MAP_ANON
            #else
            let flags = MAP_PRIVATE | MAP_ANONYMOUS
            #endif
            if let mapped = mmap(nil, capacity, PROT_READ | PROT_WRITE, flags, -1, 0), mapped != MAP_FAILED {
                base = mapped
                isMapped = true
                return
            }
        }
        guard let allocated = malloc(max(capacity, 1)) else { fatalError("out of memory reading \(capacity) bytes") }
        base = allocated
        isMapped = false
    }

    deinit {
        if isMapped { munmap(base, capacity) } else { free(base) }
    }

    /// The bytes read.
    var buffer: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: count)
    }
}
