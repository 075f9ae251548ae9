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
    let isPrivate: Bool
    let lease = Mutex(Lease())
    private let temporaryNumber = Atomic<Int>(0)

    /// What `lease` guards: this writer's lease file and the digests it lists.
    struct Lease {
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

    var fileSystem: FileSystem { context.fileSystem }

    func path(_ name: String) -> String { directoryPath + "/" + name }

    func located(_ error: MirrorError) -> MirrorError {
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
    func releaseFromLease(_ digests: Set<String>) {
        lease.withLock { lease in
            guard lease.fd >= 0, !lease.digests.isDisjoint(with: digests) else { return }
            lease.digests.subtract(digests)
            let text = lease.digests.sorted().map { $0 + "\n" }.joined()
            try? fileSystem.truncate(lease.fd, to: 0)
            try? fileSystem.write(lease.fd, bytes: Array(text.utf8))
        }
    }
}
