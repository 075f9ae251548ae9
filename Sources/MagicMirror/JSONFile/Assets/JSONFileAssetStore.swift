#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Synchronization

/// The asset files of one zone of a JSON-file database, in one engine: storing, checking,
/// reading and collecting them.
///
/// ```
/// <zone>/assets/
///     <digest>              an asset's bytes, read-only, named by their SHA-256 digest
///     tmp.<writer>.<n>      an asset being written by a writer
///     lease.<writer>        digests a live writer stored and has not committed yet
///     lock                  shared by stores and commits that refer to assets,
///                           exclusive for a collection
/// ```
///
/// **Before the record.** A store writes a temporary file, flushes it, and renames it to its
/// digest; it returns only then, so the record that refers to it is committed after. A
/// commit that refers to assets holds `lock` shared from checking that each file exists
/// until it is stored, so a collection cannot remove a file between the check and the commit.
///
/// **Leases.** A writer keeps `lease.<writer>` open with an exclusive `flock` for as long as
/// its engine lives, and lists in it every asset it stored and did not yet commit a record
/// referring to. The `flock` goes when the process dies, so a lease nobody holds belongs to
/// a dead writer. A collection (holding `lock` exclusive) keeps every asset a live lease
/// lists or a live record refers to, and removes the rest, the temporary files of dead
/// writers and their leases. A lease is created and changed only under `lock` (shared), so
/// a collection never sees a half-made one.
///
/// Lock order: `lock` (this directory) before the zone's writers' lock.
final class JSONFileAssetStore: Sendable {
    let zone: ZoneID
    let context: JSONFileContext
    /// The path of the zone's `assets` directory.
    let directoryPath: String
    private let isPrivate: Bool
    private let lease = Mutex(Lease())
    private let temporaryNumber = Atomic<Int>(0)

    /// What `lease` guards: this writer's lease file and the digests it lists.
    private struct Lease {
        var fd: Int32 = -1
        var digests: Set<String> = []
    }

    static let directoryName = "assets"
    static let lockName = "lock"
    static let leasePrefix = "lease."
    static let temporaryPrefix = "tmp."
    /// The size of the pieces files are copied and read in.
    static let chunkSize = 1 << 20

    init(zone: ZoneID, context: JSONFileContext) {
        self.zone = zone
        self.context = context
        self.isPrivate = zone.scope == .private
        self.directoryPath = ([context.rootPath] + JSONFileZone.components(of: zone) + [Self.directoryName])
            .joined(separator: "/")
    }

    deinit {
        lease.withLock { lease in
            if lease.fd >= 0 { close(lease.fd) }
        }
    }

    private var fileSystem: FileSystem { context.fileSystem }

    private func path(_ name: String) -> String { directoryPath + "/" + name }

    private func located(_ error: MirrorError) -> MirrorError {
        error.adding(recordType: zone.recordType, scope: zone.scope)
    }

    // MARK: Storing

    /// Copies bytes from `read` into an asset file: temporary file, flush, lease, rename.
    ///
    /// - Parameters:
    ///   - durable: Whether to flush the file and the directory.
    ///   - isCancelled: Asked between pieces; when it says yes, the copy is removed.
    ///   - read: Fills the buffer with the next bytes and returns how many; 0 at the end.
    func store(
        durable: Bool, isCancelled: () -> Bool,
        read: (UnsafeMutableRawBufferPointer) throws(MirrorError) -> Int
    ) throws(MirrorError) -> Asset {
        guard let directory = try openDirectory(create: true) else {
            throw located(MirrorError(
                .notFound, "the directory of \(zone) was removed by another program while it was open",
                file: directoryPath))
        }
        defer { close(directory) }
        try withLock(directory, shared: true) { () throws(MirrorError) in try openLease(directory) }

        let temporary = Self.temporaryPrefix + context.writerID + "."
            + String(temporaryNumber.wrappingAdd(1, ordering: .relaxed).newValue)
        let fd: Int32
        do {
            fd = try fileSystem.open(
                at: directory, temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                mode: isPrivate ? 0o600 : 0o666)
        } catch {
            throw located(error.mirrorError(file: path(temporary)))
        }
        var renamed = false
        defer {
            if !renamed { try? fileSystem.unlink(at: directory, temporary) }
        }
        var hash = SHA256()
        var size = 0
        do throws(MirrorError) {
            defer { close(fd) }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                if isCancelled() {
                    throw MirrorError(.cancelled, "storing an asset was cancelled; nothing was kept")
                }
                let count = try read(buffer)
                if count == 0 { break }
                let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                hash.update(piece)
                size += count
                do {
                    try fileSystem.write(fd, piece)
                } catch {
                    throw error.mirrorError(file: path(temporary))
                }
            }
            do {
                if durable { try fileSystem.sync(fd) }
                try fileSystem.changeMode(fd, to: isPrivate ? 0o400 : 0o444)
            } catch {
                throw error.mirrorError(file: path(temporary))
            }
        } catch {
            throw located(error)
        }
        let digest = hash.finish()
        try withLock(directory, shared: true) { () throws(MirrorError) in
            try addToLease(digest)
            do throws(FileSystem.Failure) {
                try fileSystem.rename(at: directory, temporary, to: digest)
                renamed = true
                if durable { try fileSystem.sync(directory, metadata: true) }
            } catch {
                throw located(error.mirrorError(file: path(digest)))
            }
        }
        return Asset(validDigest: digest, size: size)
    }

    /// Opens and locks this writer's lease file the first time this writer stores an asset
    /// in the zone. Under `lock`, shared.
    private func openLease(_ directory: Int32) throws(MirrorError) {
        try lease.withLock { lease throws(MirrorError) in
            if lease.fd >= 0 { return }
            let name = Self.leasePrefix + context.writerID
            let fd: Int32
            do throws(FileSystem.Failure) {
                fd = try fileSystem.open(
                    at: directory, name, flags: O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW,
                    mode: isPrivate ? 0o600 : 0o666)
            } catch {
                throw located(error.mirrorError(file: path(name)))
            }
            let code = FileLock.tryLock(fd)
            guard code == 0 else {
                close(fd)
                throw located(MirrorError.posix(code, "flock", file: path(name)))
            }
            lease.fd = fd
        }
    }

    /// Lists `digest` in this writer's lease. Under `lock`, shared.
    private func addToLease(_ digest: String) throws(MirrorError) {
        try lease.withLock { lease throws(MirrorError) in
            guard lease.digests.insert(digest).inserted else { return }
            do throws(FileSystem.Failure) {
                try fileSystem.write(lease.fd, bytes: Array((digest + "\n").utf8))
            } catch {
                lease.digests.remove(digest)
                throw located(error.mirrorError(file: path(Self.leasePrefix + context.writerID)))
            }
        }
    }

    /// Takes `digests` off this writer's lease: a committed record refers to them now.
    /// Under `lock`, shared. A failure leaves them listed, which only delays their collection.
    private func releaseFromLease(_ digests: Set<String>) {
        lease.withLock { lease in
            guard lease.fd >= 0, !lease.digests.isDisjoint(with: digests) else { return }
            lease.digests.subtract(digests)
            let text = lease.digests.sorted().map { $0 + "\n" }.joined()
            try? fileSystem.truncate(lease.fd, to: 0)
            try? fileSystem.write(lease.fd, bytes: Array(text.utf8))
        }
    }

    // MARK: Committing records that refer to assets

    /// Checks that every asset in `referenced` is stored and takes `lock` shared, so that
    /// no collection removes one until the returned descriptor is closed: hold it until the
    /// records that refer to them are committed, then call ``committed(_:)``.
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` for a missing asset,
    ///   ``MirrorError/Kind/corruptEntry`` for one replaced by something else than a file.
    func holdReferences(_ referenced: Set<String>, recordIDs: [String]) async throws(MirrorError) -> Int32 {
        let digests = referenced.sorted()
        guard let directory = try openDirectory(create: false) else {
            throw missing(digests[0], recordIDs: recordIDs)
        }
        defer { close(directory) }
        let lockFD = try await lockAsynchronously(directory, shared: true)
        for digest in digests {
            guard let info = JSONFileIO.info(at: directory, digest) else {
                close(lockFD)
                throw missing(digest, recordIDs: recordIDs)
            }
            if info.isSymbolicLink || info.isDirectory {
                close(lockFD)
                throw located(MirrorError(
                    .corruptEntry,
                    "\(path(digest)) is not an asset file (another program replaced it); the records "
                        + "that refer to it were not committed. Store the asset again.",
                    recordIDs: recordIDs, file: path(digest)))
            }
        }
        return lockFD
    }

    /// Records that refer to `digests` were committed: the assets leave this writer's lease.
    /// Call it while holding the descriptor ``holdReferences(_:recordIDs:)`` returned.
    func committed(_ digests: Set<String>) {
        releaseFromLease(digests)
    }

    private func missing(_ digest: String, recordIDs: [String]) -> MirrorError {
        located(MirrorError(
            .notFound,
            "the asset \(digest) is not stored in \(zone) (no file \(path(digest))); the records "
                + "that refer to it were not committed. Store the asset in this zone first.",
            recordIDs: recordIDs, file: path(digest)))
    }

    // MARK: Reading

    /// The checked file of `asset`.
    func fileURL(for asset: Asset) throws(MirrorError) -> URL {
        guard let directory = try openDirectory(create: false) else { throw missingFile(asset) }
        defer { close(directory) }
        guard let info = JSONFileIO.info(at: directory, asset.digest) else { throw missingFile(asset) }
        try check(info, of: asset)
        return URL(fileURLWithPath: path(asset.digest), isDirectory: false)
    }

    /// Opens the file of `asset` for reading, checked.
    func open(_ asset: Asset) throws(MirrorError) -> Int32 {
        guard let directory = try openDirectory(create: false) else { throw missingFile(asset) }
        defer { close(directory) }
        let fd: Int32
        do {
            fd = try fileSystem.open(at: directory, asset.digest, flags: O_RDONLY | O_NOFOLLOW)
        } catch {
            if error.code == ENOENT { throw missingFile(asset) }
            if error.code == ELOOP { throw changedFile(asset, "is a symbolic link") }
            throw located(error.mirrorError(file: path(asset.digest)))
        }
        guard let info = JSONFileIO.info(fd) else {
            close(fd)
            throw located(MirrorError.posix(errno, "fstat", file: path(asset.digest)))
        }
        do throws(MirrorError) {
            try check(info, of: asset)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    private func check(_ info: JSONFileIO.FileInfo, of asset: Asset) throws(MirrorError) {
        if info.isSymbolicLink { throw changedFile(asset, "is a symbolic link") }
        if info.isDirectory { throw changedFile(asset, "is a directory") }
        if info.size != asset.size { throw changedFile(asset, "has \(info.size) bytes, not \(asset.size)") }
    }

    func missingFile(_ asset: Asset) -> MirrorError {
        located(MirrorError(
            .notFound,
            "the file of \(asset) is missing: \(path(asset.digest)) was removed by another program "
                + "(or the asset was never stored in \(zone)). The records are unchanged.",
            file: path(asset.digest)))
    }

    func changedFile(_ asset: Asset, _ what: String) -> MirrorError {
        located(MirrorError(
            .corruptEntry,
            "the file of \(asset), \(path(asset.digest)), \(what): another program changed it. "
                + "The records are unchanged; store the asset again to repair it.",
            file: path(asset.digest)))
    }

    // MARK: Collecting

    /// Removes the asset files no live record of the zone refers to and no live writer
    /// leases, the temporary files and leases of dead writers.
    ///
    /// - Parameter referenced: Reads the digests the zone's live records refer to (called
    ///   with `lock` held exclusive).
    /// - Returns: How many asset files were removed.
    func removeUnreferenced(
        listing names: (Int32) -> [String], referenced: () throws(MirrorError) -> Set<String>
    ) throws(MirrorError) -> Int {
        guard let directory = try openDirectory(create: false) else { return 0 }
        defer { close(directory) }
        return try withLock(directory, shared: false) { () throws(MirrorError) -> Int in
            let entries = names(directory)
            var leased = lease.withLock { $0.digests }
            var liveWriters: Set<String> = [context.writerID]
            var changed = false
            for name in entries where name.hasPrefix(Self.leasePrefix) {
                let writer = String(name.dropFirst(Self.leasePrefix.count))
                if writer == context.writerID { continue }
                guard let fd = try? fileSystem.open(at: directory, name, flags: O_RDONLY | O_NOFOLLOW) else { continue }
                defer { close(fd) }
                if FileLock.tryLock(fd) == 0 {
                    // No process holds it: its writer is gone, and so is what it did not commit.
                    try? fileSystem.unlink(at: directory, name)
                    changed = true
                } else {
                    liveWriters.insert(writer)
                    let text = String(decoding: (try? JSONFileIO.readAll(fd)) ?? [], as: UTF8.self)
                    for line in text.split(separator: "\n") where Asset.isDigest(String(line)) {
                        leased.insert(String(line))
                    }
                }
            }
            let kept = try referenced().union(leased)
            var removed = 0
            for name in entries {
                if Asset.isDigest(name) {
                    guard !kept.contains(name) else { continue }
                    if (try? fileSystem.unlink(at: directory, name)) != nil {
                        removed += 1
                        changed = true
                    }
                } else if name.hasPrefix(Self.temporaryPrefix) {
                    let rest = name.dropFirst(Self.temporaryPrefix.count)
                    guard let dot = rest.lastIndex(of: "."), !liveWriters.contains(String(rest[..<dot])) else { continue }
                    if (try? fileSystem.unlink(at: directory, name)) != nil { changed = true }
                }
            }
            if changed { try? fileSystem.sync(directory, metadata: true) }
            return removed
        }
    }

    // MARK: Directory and lock

    /// Opens the zone's `assets` directory without following symbolic links, creating it
    /// when asked; `nil` when it does not exist and `create` is `false`. The zone's own
    /// directories must exist (the zone was loaded).
    func openDirectory(create: Bool) throws(MirrorError) -> Int32? {
        var parent = context.rootFD
        var current = context.rootPath
        var opened: [Int32] = []
        var result: Int32 = -1
        // Every directory opened on the way, except the one returned.
        defer { for fd in opened where fd != result { close(fd) } }
        let components = JSONFileZone.components(of: zone) + [Self.directoryName]
        for (index, name) in components.enumerated() {
            current += "/" + name
            let isLast = index == components.count - 1
            var fd: Int32 = -1
            for _ in 0..<3 where fd < 0 {
                do {
                    fd = try fileSystem.open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                } catch {
                    if error.code == ENOENT && isLast {
                        guard create else { return nil }
                        do {
                            try fileSystem.makeDirectory(at: parent, name, mode: isPrivate ? 0o700 : 0o777)
                            try? fileSystem.sync(parent, metadata: true)
                        } catch {
                            if error.code != EEXIST { throw located(error.mirrorError(file: current)) }
                        }
                        continue
                    }
                    if error.code == ENOENT { return nil }
                    if error.code == ELOOP || error.code == ENOTDIR {
                        throw located(MirrorError(
                            .permissionDenied,
                            "\(current) is not a directory (a symbolic link?); the JSON-file database "
                                + "does not follow links below its directory, so it never reads or "
                                + "writes outside it",
                            file: current))
                    }
                    throw located(error.mirrorError(file: current))
                }
            }
            guard fd >= 0 else {
                throw located(MirrorError(.ioFailure, "could not create the directory \(current)", file: current))
            }
            opened.append(fd)
            parent = fd
        }
        result = parent
        return result
    }

    /// Opens `lock` in the assets directory.
    private func openLockFile(_ directory: Int32) throws(MirrorError) -> Int32 {
        do {
            return try fileSystem.openWritableOrReadOnly(
                at: directory, Self.lockName, flags: O_CREAT, mode: isPrivate ? 0o600 : 0o666).fd
        } catch {
            throw located(error.mirrorError(file: path(Self.lockName)))
        }
    }

    /// Runs `body` holding `lock`, blocking this thread while another holds it.
    private func withLock<Value>(
        _ directory: Int32, shared: Bool, _ body: () throws(MirrorError) -> Value
    ) throws(MirrorError) -> Value {
        let fd = try openLockFile(directory)
        defer { close(fd) }
        let code = FileLock.lock(fd, shared: shared)
        guard code == 0 else { throw located(MirrorError.posix(code, "flock", file: path(Self.lockName))) }
        return try body()
    }

    /// Takes `lock` without blocking a task's thread: at once when it is free, otherwise on
    /// a dispatch thread. Closing the returned descriptor releases it.
    private func lockAsynchronously(_ directory: Int32, shared: Bool) async throws(MirrorError) -> Int32 {
        let fd = try openLockFile(directory)
        var code = FileLock.tryLock(fd, shared: shared)
        if code == EWOULDBLOCK {
            code = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: FileLock.lock(fd, shared: shared))
                }
            }
        }
        guard code == 0 else {
            close(fd)
            throw located(MirrorError.posix(code, "flock", file: path(Self.lockName)))
        }
        return fd
    }
}

/// Runs blocking file work on a dispatch thread, so that it does not hold one of the few
/// threads tasks run on.
func runBlocking<Value: Sendable>(
    _ work: @escaping @Sendable () throws(MirrorError) -> Value
) async throws(MirrorError) -> Value {
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, MirrorError>, Never>) in
        DispatchQueue.global().async {
            do throws(MirrorError) {
                continuation.resume(returning: .success(try work()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try outcome.get()
}
