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
    }

    /// `fstat` of an open file, or `nil` with `errno` set.
    static func info(_ fd: Int32) -> FileInfo? {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return FileInfo(status)
    }

    /// `fstatat` without following a final symbolic link, or `nil` with `errno` set.
    static func info(at directory: Int32, _ name: String) -> FileInfo? {
        var status = stat()
        guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return FileInfo(status)
    }

    /// Reads `count` bytes at `offset` (fewer if the file is shorter).
    static func read(_ fd: Int32, from offset: Int, count: Int) throws(FileSystem.Failure) -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        let failure: Int32? = bytes.withUnsafeMutableBytes { raw -> Int32? in
            while done < count {
                let got = pread(fd, raw.baseAddress! + done, count - done, off_t(offset + done))
                if got < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if got == 0 { break }
                done += got
            }
            return nil
        }
        if let failure { throw FileSystem.Failure(operation: .open, code: failure) }
        if done < count { bytes.removeLast(count - done) }
        return bytes
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
