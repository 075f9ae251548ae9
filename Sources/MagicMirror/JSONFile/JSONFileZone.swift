import Dispatch
import Foundation
import Synchronization

/// One zone of a JSON-file database in one engine: its directory, files and in-memory
/// state, the group-commit queue of its writers, catch-up with other writers, recovery and
/// compaction.
///
/// This file holds its state; each job is an extension in the folder named after it:
/// `Reading/` (loading, consistent reads, catching up with other writers), `Writing/` (the
/// group-commit queue, appends, compaction), `Recovery/` (torn tails, quarantine, files
/// other programs replaced) and `Files/` (its directories and the system calls).
///
/// Locks, always taken in this order:
/// 1. `disk` (a `Mutex`): file descriptors and read positions. Held while reading or
///    writing the zone's files, including across the `flock` and `fsync` of a commit.
///    Readers of the state never wait for it; catch-up only tries it.
/// 2. the zone's `lock` file (`flock`), shared with every other process and engine:
///    held by writers (commit, compaction, cutting a torn tail), never by readers.
/// 3. `memory` (a `Mutex`): the ``ZoneState``; held only for short, CPU-only work.
final class JSONFileZone: Sendable {
    let zone: ZoneID
    let context: JSONFileContext
    /// The zone directory's path, for messages and watchers.
    let directoryPath: String
    let isPrivate: Bool

    let memory = Mutex(ZoneState())
    let disk = Mutex(Disk())
    let queue = Mutex(CommitQueue())
    let loaded = Atomic<Bool>(false)
    let catchUpRequested = Atomic<Bool>(false)
    let compactionScheduled = Atomic<Bool>(false)
    /// The bytes of journals read, loading included (tests: each new byte is read once).
    let journalBytesRead = Atomic<Int>(0)
    /// Entered while an automatic compaction is scheduled or running.
    let backgroundWork = DispatchGroup()

    /// What `disk` guards.
    struct Disk {
        var loaded = false
        var directoryFD: Int32 = -1 { didSet { directoryIdentity = JSONFileIO.identity(directoryFD) } }
        var lockFD: Int32 = -1 { didSet { lockIdentity = JSONFileIO.identity(lockFD) } }
        /// The snapshot the state was loaded from (kept open so its inode cannot be reused
        /// and mistaken for a new snapshot); -1 when there is none.
        var snapshotFD: Int32 = -1
        var snapshot: JSONFileIO.FileInfo?
        var generation = 0
        /// The current generation's journal; -1 when it does not exist yet.
        var journalFD: Int32 = -1 { didSet { journalIdentity = JSONFileIO.identity(journalFD) } }
        // The device and inode of the descriptors above, read when each is set: they do not
        // change while it is open, and the checks that the files are still the ones at
        // their names (before every append) then read only the names.
        private(set) var directoryIdentity: JSONFileIO.Identity?
        private(set) var lockIdentity: JSONFileIO.Identity?
        private(set) var journalIdentity: JSONFileIO.Identity?
        var journalWritable = false
        /// The end of the last complete append read from the journal: where the next
        /// append goes.
        var journalEnd = 0
        /// The end of the data read from the journal, past `journalEnd` when the bytes of
        /// an unfinished append follow it (a writer's append in progress, or the remains of
        /// one that died); the journal's reserved tail (spaces) is not data.
        var journalSeen = 0
        /// The journal's size when it was last read, reserved tail included.
        var journalSize = 0
        /// Set when cutting back a failed append failed: the next writer cuts there first,
        /// and readers of this engine read no further.
        var mustTruncateTo: Int?
        /// Set while a complete append waits for its flush: if the flush fails, other
        /// processes may have read it.
        var appendWasVisible = false
    }

    init(zone: ZoneID, context: JSONFileContext) {
        self.zone = zone
        self.context = context
        self.isPrivate = zone.scope == .private
        var path = context.rootPath
        for component in Self.components(of: zone) { path += "/" + component }
        self.directoryPath = path
    }

    deinit {
        disk.withLock { disk in
            for fd in [disk.directoryFD, disk.lockFD, disk.snapshotFD, disk.journalFD] where fd >= 0 {
                close(fd)
            }
        }
    }

    /// The directory names from the root to the zone.
    static func components(of zone: ZoneID) -> [String] {
        switch zone.scope {
        case .public: [JSONFileFormat.publicDirectory, zone.recordType]
        case .private: [JSONFileFormat.privateDirectory, zone.user ?? "", zone.recordType]
        case .shared: [JSONFileFormat.sharedDirectory, zone.user ?? "", zone.recordType]
        }
    }

    /// The mode new files of the zone are created with (before the umask).
    var fileMode: mode_t { isPrivate ? 0o600 : 0o666 }

    var fileSystem: FileSystem { context.fileSystem }

    func path(_ name: String) -> String { directoryPath + "/" + name }

    /// Adds the zone's context to an error.
    func located(_ error: MirrorError, recordIDs: [String]? = nil) -> MirrorError {
        error.adding(recordIDs: recordIDs, recordType: zone.recordType, scope: zone.scope)
    }
}
