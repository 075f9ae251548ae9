
/// The system calls the JSON-file database changes the disk with, as a value: ``live``
/// makes them; a test hands the database another value (MirrorTesting's
/// `FaultyFileSystem`) that counts them, fails chosen ones or kills the process at one.
///
/// Every call that creates, writes, flushes, renames, truncates or removes something goes
/// through the engine's value; reads do not. The live calls are the plain system calls
/// (retried on `EINTR`), with no lock and no bookkeeping.
///
/// ```swift
/// let faulty = FaultyFileSystem()
/// let database = try JSONFileDatabase(isolatedDirectory: url, fileSystem: faulty.fileSystem)
/// faulty.failNext(.fsync, errno: EIO)
/// // the next commit throws MirrorError.Kind.ioFailure and stores nothing
/// ```
package struct FileSystem: Sendable {
    /// A kind of call, as named in failures (and counted by test file systems).
    package enum Operation: String, Hashable, Sendable, CaseIterable {
        case open, mkdir, write, fsync, rename, truncate, unlink, link, chmod
    }

    /// A failed call: the operation and its `errno`.
    package struct Failure: Error, Sendable {
        /// The call that failed.
        package var operation: Operation
        /// Its `errno`.
        package var code: Int32

        /// A failure of `operation` with `code`.
        package init(operation: Operation, code: Int32) {
            self.operation = operation
            self.code = code
        }
    }

    /// `openat(directory, name, flags | O_CLOEXEC, mode)`: the new descriptor.
    package let openFile: @Sendable (_ directory: Int32, _ name: String, _ flags: Int32, _ mode: mode_t) throws(Failure) -> Int32
    /// `mkdirat(directory, name, mode)`.
    package let makeDirectoryFile: @Sendable (_ directory: Int32, _ name: String, _ mode: mode_t) throws(Failure) -> Void
    /// Writes every byte of the buffer at the file's offset; some may be written before a failure.
    package let writeBytes: @Sendable (_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Failure) -> Void
    /// Flushes a file's data (or, with `metadata`, its data and metadata) to stable storage.
    package let syncFile: @Sendable (_ fd: Int32, _ metadata: Bool) throws(Failure) -> Void
    /// `renameat` within one directory.
    package let renameFile: @Sendable (_ directory: Int32, _ from: String, _ to: String) throws(Failure) -> Void
    /// `linkat` within one directory.
    package let linkFile: @Sendable (_ directory: Int32, _ from: String, _ to: String) throws(Failure) -> Void
    /// `ftruncate`.
    package let truncateFile: @Sendable (_ fd: Int32, _ length: Int) throws(Failure) -> Void
    /// `unlinkat` of a file.
    package let unlinkFile: @Sendable (_ directory: Int32, _ name: String) throws(Failure) -> Void
    /// `fchmod`.
    package let changeFileMode: @Sendable (_ fd: Int32, _ mode: mode_t) throws(Failure) -> Void

    /// A file system made of the given calls; see ``live`` for what each must do.
    package init(
        openFile: @escaping @Sendable (Int32, String, Int32, mode_t) throws(Failure) -> Int32,
        makeDirectoryFile: @escaping @Sendable (Int32, String, mode_t) throws(Failure) -> Void,
        writeBytes: @escaping @Sendable (Int32, UnsafeRawBufferPointer) throws(Failure) -> Void,
        syncFile: @escaping @Sendable (Int32, Bool) throws(Failure) -> Void,
        renameFile: @escaping @Sendable (Int32, String, String) throws(Failure) -> Void,
        linkFile: @escaping @Sendable (Int32, String, String) throws(Failure) -> Void,
        truncateFile: @escaping @Sendable (Int32, Int) throws(Failure) -> Void,
        unlinkFile: @escaping @Sendable (Int32, String) throws(Failure) -> Void,
        changeFileMode: @escaping @Sendable (Int32, mode_t) throws(Failure) -> Void
    ) {
        self.openFile = openFile
        self.makeDirectoryFile = makeDirectoryFile
        self.writeBytes = writeBytes
        self.syncFile = syncFile
        self.renameFile = renameFile
        self.linkFile = linkFile
        self.truncateFile = truncateFile
        self.unlinkFile = unlinkFile
        self.changeFileMode = changeFileMode
    }

    // MARK: Calls

    /// `openat`, retried on `EINTR`.
    ///
    /// - Returns: The new file descriptor.
    package func open(at directory: Int32, _ name: String, flags: Int32, mode: mode_t = 0) throws(Failure) -> Int32 {
        try openFile(directory, name, flags, mode)
    }

    /// Opens `name` for reading and writing, or for reading only when this process may not
    /// write it (`EACCES`, `EROFS`): a file other users own, a read-only mount. Symbolic
    /// links are never followed.
    ///
    /// - Parameter flags: The flags of the read-write open besides `O_RDWR` and
    ///   `O_NOFOLLOW` (for example `O_APPEND | O_CREAT`); the read-only open takes none.
    /// - Returns: The descriptor, and whether it was opened for writing.
    /// - Throws: The failure of the read-write open when the read-only one fails too, or
    ///   when it failed for another reason.
    package func openWritableOrReadOnly(
        at directory: Int32, _ name: String, flags: Int32 = 0, mode: mode_t = 0
    ) throws(Failure) -> (fd: Int32, isWritable: Bool) {
        do {
            return (try open(at: directory, name, flags: O_RDWR | O_NOFOLLOW | flags, mode: mode), true)
        } catch {
            guard error.code == EACCES || error.code == EROFS,
                  let fd = try? open(at: directory, name, flags: O_RDONLY | O_NOFOLLOW)
            else { throw error }
            return (fd, false)
        }
    }

    /// `mkdirat`.
    package func makeDirectory(at directory: Int32, _ name: String, mode: mode_t) throws(Failure) {
        try makeDirectoryFile(directory, name, mode)
    }

    /// Writes every byte of `buffer` at the file's current offset (the end, for a file
    /// opened with `O_APPEND`), looping over short writes.
    ///
    /// - Throws: A ``Failure``; some bytes may have been written before it.
    package func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Failure) {
        try writeBytes(fd, buffer)
    }

    /// Writes every byte of `bytes`; see ``write(_:_:)-(_,UnsafeRawBufferPointer)``.
    package func write(_ fd: Int32, bytes: [UInt8]) throws(Failure) {
        let failure = bytes.withUnsafeBytes { raw -> Failure? in
            do throws(Failure) {
                try writeBytes(fd, raw)
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
        try syncFile(fd, metadata)
    }

    /// `renameat` within one directory.
    package func rename(at directory: Int32, _ from: String, to: String) throws(Failure) {
        try renameFile(directory, from, to)
    }

    /// `linkat` within one directory: makes `to` name the file `from` names, failing with
    /// `EEXIST` if `to` exists.
    package func link(at directory: Int32, _ from: String, to: String) throws(Failure) {
        try linkFile(directory, from, to)
    }

    /// `ftruncate`.
    package func truncate(_ fd: Int32, to length: Int) throws(Failure) {
        try truncateFile(fd, length)
    }

    /// `unlinkat` of a file.
    package func unlink(at directory: Int32, _ name: String) throws(Failure) {
        try unlinkFile(directory, name)
    }

    /// `fchmod`.
    package func changeMode(_ fd: Int32, to mode: mode_t) throws(Failure) {
        try changeFileMode(fd, mode)
    }
}

extension FileSystem {
    /// The system calls themselves.
    package static let live = FileSystem(
        openFile: { directory, name, flags, mode throws(Failure) -> Int32 in
            while true {
                let fd = openat(directory, name, flags | O_CLOEXEC, mode)
                if fd >= 0 { return fd }
                if errno != EINTR { throw Failure(operation: .open, code: errno) }
            }
        },
        makeDirectoryFile: { directory, name, mode throws(Failure) in
            guard mkdirat(directory, name, mode) == 0 else { throw Failure(operation: .mkdir, code: errno) }
        },
        writeBytes: { fd, buffer throws(Failure) in
            var offset = 0
            while offset < buffer.count {
                let written = Platform.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure(operation: .write, code: errno)
                }
                offset += written
            }
        },
        syncFile: { fd, metadata throws(Failure) in
            while true {
                if Platform.sync(fd, metadata: metadata) == 0 { return }
                if errno != EINTR { throw Failure(operation: .fsync, code: errno) }
            }
        },
        renameFile: { directory, from, to throws(Failure) in
            guard renameat(directory, from, directory, to) == 0 else { throw Failure(operation: .rename, code: errno) }
        },
        linkFile: { directory, from, to throws(Failure) in
            guard linkat(directory, from, directory, to, 0) == 0 else { throw Failure(operation: .link, code: errno) }
        },
        truncateFile: { fd, length throws(Failure) in
            while ftruncate(fd, off_t(length)) != 0 {
                if errno != EINTR { throw Failure(operation: .truncate, code: errno) }
            }
        },
        unlinkFile: { directory, name throws(Failure) in
            guard unlinkat(directory, name, 0) == 0 else { throw Failure(operation: .unlink, code: errno) }
        },
        changeFileMode: { fd, mode throws(Failure) in
            guard fchmod(fd, mode) == 0 else { throw Failure(operation: .chmod, code: errno) }
        })
}

extension FileSystem.Failure {
    /// The failure as a ``MirrorError`` about `file`.
    package func mirrorError(file: String) -> MirrorError {
        MirrorError.posix(code, operation.rawValue, file: file)
    }
}
