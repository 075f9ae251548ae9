#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Synchronization

/// One zone of a JSON-file database in one engine: its directory, files and in-memory
/// state, the group-commit queue of its writers, catch-up with other writers, recovery and
/// compaction.
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
    /// Entered while an automatic compaction is scheduled or running.
    let backgroundWork = DispatchGroup()

    /// What `disk` guards.
    struct Disk {
        var loaded = false
        var directoryFD: Int32 = -1
        var lockFD: Int32 = -1
        /// The snapshot the state was loaded from (kept open so its inode cannot be reused
        /// and mistaken for a new snapshot); -1 when there is none.
        var snapshotFD: Int32 = -1
        var snapshot: JSONFileIO.FileInfo?
        var generation = 0
        /// The current generation's journal; -1 when it does not exist yet.
        var journalFD: Int32 = -1
        var journalWritable = false
        /// The end of the last complete append read from the journal.
        var journalEnd = 0
        /// The journal's size when it was last read.
        var journalSeen = 0
        /// Set when cutting back a failed append failed: the next writer cuts there first,
        /// and readers of this engine read no further.
        var mustTruncateTo: Int?
        /// Set while a complete append waits for its flush: if the flush fails, other
        /// processes may have read it.
        var appendWasVisible = false
    }

    /// A commit waiting for the zone's flusher.
    struct CommitRequest: Sendable {
        var operations: [RecordOperation]
        var durable: Bool
        var compactionThreshold: Int
        /// `nil` for the commit of a leader, which gets its result directly.
        var continuation: CheckedContinuation<CommitOutcome, any Error>?
    }

    struct CommitQueue {
        var pending: [CommitRequest] = []
        /// Whether a flusher is running; when `false`, `pending` is empty.
        var flushing = false
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

    // MARK: Reading

    /// Loads the zone from disk the first time it is used.
    func load() throws(MirrorError) {
        if loaded.load(ordering: .acquiring) { return }
        let notifications = try disk.withLock { disk throws(MirrorError) -> [RemoteNotification] in
            try ensureLoaded(&disk)
        }
        deliver(notifications)
        // A watcher that fired while the zone was loading found `disk` busy and left its
        // catch-up to the holder.
        catchUpIfRequested()
    }

    /// A consistent read of the state, after catching up with other writers.
    ///
    /// Waits for a catch-up or commit in progress on another thread, so a read never
    /// returns the state from before a change that was on disk when it started.
    func read<Result: Sendable>(_ body: (borrowing ZoneState) -> Result) throws(MirrorError) -> Result {
        try load()
        catchUp(waiting: true)
        return memory.withLock { body($0) }
    }

    /// Reads what other writers appended since the last look and tells subscribers.
    ///
    /// Cheap when nothing changed (a few `stat` calls).
    ///
    /// - Parameter waiting: Whether to wait for another thread that holds the zone (a
    ///   read must); when `false` (a watcher), a busy zone is left to its holder, which
    ///   catches up when it finishes.
    func catchUp(waiting: Bool = false) {
        guard loaded.load(ordering: .acquiring) else { return }
        catchUpRequested.store(true, ordering: .sequentiallyConsistent)
        while catchUpRequested.load(ordering: .sequentiallyConsistent) {
            let outcome: Result<[RemoteNotification], MirrorError>?
            if waiting {
                outcome = disk.withLock { disk in catchUpPass(&disk) }
            } else {
                outcome = disk.withLockIfAvailable { disk in catchUpPass(&disk) }
            }
            switch outcome {
            case nil: return  // the holder catches up when it is done
            case .success(let notifications)?: deliver(notifications)
            case .failure(let error)?:
                context.problems.report(located(error), key: "catch-up \(directoryPath): \(error.message)")
            }
        }
    }

    /// One catch-up pass, with `disk` held: clears the request first, so that a request
    /// made while it runs is seen by the loop in ``catchUp(waiting:)``.
    private func catchUpPass(_ disk: inout Disk) -> Result<[RemoteNotification], MirrorError> {
        catchUpRequested.store(false, ordering: .sequentiallyConsistent)
        do throws(MirrorError) {
            return .success(try synchronize(&disk, underLock: false))
        } catch {
            return .failure(error)
        }
    }

    /// Runs a catch-up that was requested while `disk` was held.
    func catchUpIfRequested() {
        if catchUpRequested.load(ordering: .sequentiallyConsistent) { catchUp() }
    }

    func deliver(_ notifications: [RemoteNotification]) {
        guard !notifications.isEmpty else { return }
        // One zone per call, as SubscriberList expects.
        context.subscribers.deliver(notifications)
    }

    func ensureLoaded(_ disk: inout Disk) throws(MirrorError) -> [RemoteNotification] {
        if disk.loaded { return [] }
        if disk.directoryFD < 0 {
            disk.directoryFD = try openDirectory()
        }
        var notifications = try reload(&disk, underLock: false)
        disk.loaded = true
        loaded.store(true, ordering: .releasing)
        if disk.journalSeen > disk.journalEnd {
            // Something follows the last complete append: a commit in progress, or the
            // remains of a writer that died. Look again under the writers' lock.
            if let lockFD = try? lockWriters(&disk, mayWait: true) {
                defer { FileLock.unlock(lockFD) }
                if let more = try? synchronize(&disk, underLock: true) { notifications += more }
            }
        }
        return notifications
    }

    /// Opens (creating as needed) the directories from the root to the zone, refusing
    /// symbolic links.
    private func openDirectory() throws(MirrorError) -> Int32 {
        var parent = context.rootFD
        var path = context.rootPath
        var toClose: [Int32] = []
        defer { for fd in toClose { close(fd) } }
        let components = Self.components(of: zone)
        for (index, name) in components.enumerated() {
            path += "/" + name
            // public/…: umask; private/: 0711 (others may pass, not list users);
            // private/<user>/…: 0700.
            let mode: mode_t = !isPrivate ? 0o777 : (index == 0 ? 0o711 : 0o700)
            let fd = try openDirectory(at: parent, name, path: path, mode: mode, enforce: isPrivate && index > 0)
            if index < components.count - 1 { toClose.append(fd) }
            parent = fd
        }
        return parent
    }

    private func openDirectory(
        at parent: Int32, _ name: String, path: String, mode: mode_t, enforce: Bool
    ) throws(MirrorError) -> Int32 {
        for _ in 0..<4 {
            let failure: FileSystem.Failure
            do throws(FileSystem.Failure) {
                let fd = try fileSystem.open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                if enforce, let info = JSONFileIO.info(fd), info.mode & 0o777 != mode {
                    do throws(FileSystem.Failure) {
                        try fileSystem.changeMode(fd, to: mode)
                    } catch {
                        close(fd)
                        throw error
                    }
                }
                return fd
            } catch {
                failure = error
            }
            switch failure.code {
            case ENOENT:
                do {
                    try fileSystem.makeDirectory(at: parent, name, mode: mode)
                    try? fileSystem.sync(parent, metadata: true)
                } catch {
                    if error.code != EEXIST { throw located(error.mirrorError(file: path)) }
                }
            case ELOOP, ENOTDIR, EMLINK:
                if JSONFileIO.info(at: parent, name)?.isSymbolicLink == true {
                    throw located(MirrorError(
                        .permissionDenied,
                        "\(path) is a symbolic link; the JSON-file database does not follow links "
                            + "below its directory, so it never reads or writes outside it",
                        file: path))
                }
                throw located(MirrorError(.ioFailure, "\(path) is not a directory", file: path))
            default:
                throw located(failure.mirrorError(file: path))
            }
        }
        throw located(MirrorError(.ioFailure, "could not create the directory \(path)", file: path))
    }

    /// Opens the zone's lock file once.
    func openLock(_ disk: inout Disk) throws(MirrorError) -> Int32 {
        if disk.lockFD >= 0 { return disk.lockFD }
        let name = JSONFileFormat.lockFile
        do {
            // `flock` works on a read-only descriptor too.
            disk.lockFD = try fileSystem.openWritableOrReadOnly(
                at: disk.directoryFD, name, flags: O_CREAT, mode: fileMode).fd
        } catch {
            throw located(openError(error, name))
        }
        return disk.lockFD
    }

    /// Whether the zone directory this engine holds open is no longer the one at its path:
    /// another program moved, removed or replaced it.
    private func directoryReplaced(_ disk: Disk) -> Bool {
        guard disk.directoryFD >= 0, let held = JSONFileIO.info(disk.directoryFD) else { return false }
        var status = stat()
        guard lstat(directoryPath, &status) == 0 else { return true }
        return UInt64(status.st_ino) != held.inode || UInt64(status.st_dev) != held.device
    }

    /// Before a write: when another program moved or replaced the zone directory, reports
    /// it and switches to the directory now at the zone's path (created if missing), so the
    /// write lands where every other process looks. What the moved directory holds stays
    /// there, unread.
    ///
    /// - Returns: Notifications for the differences between the two directories.
    func followReplacedDirectory(_ disk: inout Disk) throws(MirrorError) -> [RemoteNotification] {
        guard disk.loaded, directoryReplaced(disk) else { return [] }
        for fd in [disk.directoryFD, disk.lockFD, disk.snapshotFD, disk.journalFD] where fd >= 0 { close(fd) }
        disk.directoryFD = -1
        disk.lockFD = -1
        disk.snapshotFD = -1
        disk.snapshot = nil
        disk.journalFD = -1
        disk.mustTruncateTo = nil
        context.problems.report(
            located(MirrorError(
                .ioFailure,
                "the zone directory \(directoryPath) was moved, removed or replaced by another program while "
                    + "the database was open; it now uses the directory at that path, and what the moved "
                    + "directory holds is no longer read",
                file: directoryPath)),
            key: "directory replaced \(directoryPath) \(UUID().uuidString)")
        disk.directoryFD = try openDirectory()
        return try reload(&disk, underLock: false)
    }

    func openError(_ failure: FileSystem.Failure, _ name: String) -> MirrorError {
        if failure.code == ELOOP {
            return MirrorError(
                .permissionDenied,
                "\(path(name)) is a symbolic link; the JSON-file database does not follow links "
                    + "below its directory", file: path(name))
        }
        return failure.mirrorError(file: path(name))
    }

    /// Brings the in-memory state up to date with the files: reloads everything when the
    /// snapshot changed (another writer compacted), else reads the journal's new lines.
    /// Under the writers' lock, anything after the last complete append is the remains of
    /// a writer that died: it is cut off and kept in quarantine.
    ///
    /// - Returns: Notifications for changes made by other writers.
    func synchronize(_ disk: inout Disk, underLock: Bool) throws(MirrorError) -> [RemoteNotification] {
        if underLock, let length = disk.mustTruncateTo, disk.journalFD >= 0 {
            do {
                try fileSystem.truncate(disk.journalFD, to: length)
            } catch {
                throw located(error.mirrorError(file: path(JSONFileFormat.journalFile(disk.generation))))
            }
            disk.mustTruncateTo = nil
            disk.journalSeen = length
        }
        if snapshotChanged(disk) {
            return try reload(&disk, underLock: underLock)
        }
        if journalWasReplaced(disk) {
            // Another program replaced or removed the journal: under the lock, put back the
            // commits the new file lacks; then read the files as they are now.
            if underLock { try repairReplacedJournal(&disk) }
            return try reload(&disk, underLock: underLock)
        }
        if disk.journalFD < 0 {
            guard try openJournal(&disk, create: false) else { return [] }
        }
        guard let info = JSONFileIO.info(disk.journalFD) else {
            throw located(MirrorError.posix(errno, "stat", file: path(JSONFileFormat.journalFile(disk.generation))))
        }
        if info.size < disk.journalEnd {
            // Cut below what was read: another program truncated it. What was cut is gone
            // from the file; say so, and start over from what is there.
            context.problems.report(
                located(MirrorError(
                    .corruptEntry,
                    "\(path(JSONFileFormat.journalFile(disk.generation))) was cut to \(info.size) bytes by "
                        + "another program after \(disk.journalEnd) bytes of committed changes had been read; "
                        + "the zone was reloaded from what is left",
                    file: path(JSONFileFormat.journalFile(disk.generation)))),
                key: "journal cut \(path(JSONFileFormat.journalFile(disk.generation))) \(disk.journalEnd) \(info.size)")
            return try reload(&disk, underLock: underLock)
        }
        let size = disk.mustTruncateTo.map { min($0, info.size) } ?? info.size
        if size == disk.journalSeen && !(underLock && size > disk.journalEnd) {
            return []
        }
        let scan = try readJournal(&disk, size: size, after: memory.withLock { $0.token.sequence })
        let notifications = memory.withLock { state in
            apply(scan, to: &state, notify: true)
        }
        if underLock { try cutTail(&disk) }
        return notifications
    }

    /// Reads the journal from `journalEnd` to `size`, reports its bad lines and the commits
    /// that repeat a sequence number already read (`sequence`: the state's), moves the clock
    /// past other writers' readings, and moves `journalEnd` past the last complete append.
    private func readJournal(
        _ disk: inout Disk, size: Int, after sequence: Int
    ) throws(MirrorError) -> JSONFileFormat.JournalScan {
        let name = JSONFileFormat.journalFile(disk.generation)
        let start = disk.journalEnd
        let bytes: [UInt8]
        do {
            bytes = try JSONFileIO.read(disk.journalFD, from: start, count: size - start)
        } catch {
            throw located(MirrorError.posix(error.code, "read", file: path(name)))
        }
        var parser = JSONFileFormat.LineParser()
        let scan = bytes.withUnsafeBufferPointer { buffer in
            JSONFileFormat.scanJournal(
                buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!, count: buffer.count, after: sequence,
                parser: &parser)
        }
        for bad in scan.bad {
            let range = bad.offset..<(bad.offset + bad.length)
            quarantine(
                Array(bytes[range]), in: disk.directoryFD, name: "quarantine-journal-\(disk.generation)-\(start + bad.offset).bad",
                source: name, what: "line at byte \(start + bad.offset) of \(name) does not decode")
        }
        for repeated in scan.repeated {
            let range = repeated.offset..<(repeated.offset + repeated.length)
            quarantine(
                Array(bytes[range]), in: disk.directoryFD,
                name: "quarantine-journal-\(disk.generation)-\(start + repeated.offset).bad", source: name,
                what: "the commit at byte \(start + repeated.offset) of \(name) repeats sequence number "
                    + "\(repeated.sequence), which an earlier commit has, so it was not applied")
        }
        var foreignClock = HLCTimestamp.zero
        for commit in scan.commits {
            for record in commit.records where record.writer != context.writerID && record.modified > foreignClock {
                foreignClock = record.modified
            }
        }
        if foreignClock > .zero { HybridLogicalClock.shared.observe(foreignClock) }
        disk.journalEnd = start + scan.consumed
        disk.journalSeen = size
        return scan
    }

    /// Applies the complete commits of a scan, returning notifications for other writers'.
    private func apply(
        _ scan: JSONFileFormat.JournalScan, to state: inout ZoneState, notify: Bool
    ) -> [RemoteNotification] {
        var notifications: [RemoteNotification] = []
        for commit in scan.commits where commit.sequence > state.token.sequence {
            state.apply(commit.records, sequence: commit.sequence)
            guard notify else { continue }
            let foreign = commit.records.filter { $0.writer != context.writerID }
            guard !foreign.isEmpty else { continue }
            notifications += state.notifications(
                for: foreign, databaseIdentifier: context.identifier, zone: zone, writer: foreign[0].writer)
        }
        return notifications
    }

    /// Cuts what follows the last complete append (under the writers' lock only).
    private func cutTail(_ disk: inout Disk) throws(MirrorError) {
        guard disk.journalSeen > disk.journalEnd, disk.journalFD >= 0 else { return }
        let name = JSONFileFormat.journalFile(disk.generation)
        // Only a writer that holds the lock named `lock` may cut: what follows the last
        // complete append may be another writer's append in progress otherwise.
        try requireLockStillNamed(disk)
        let tail = (try? JSONFileIO.read(disk.journalFD, from: disk.journalEnd, count: disk.journalSeen - disk.journalEnd)) ?? []
        let stamp = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            .description + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        quarantine(
            tail, in: disk.directoryFD, name: "quarantine-journal-\(disk.generation)-\(disk.journalEnd)-\(stamp).torn",
            source: name,
            what: "\(tail.count) bytes after the last complete append of \(name) (an unfinished write) were cut off")
        do {
            try fileSystem.truncate(disk.journalFD, to: disk.journalEnd)
        } catch {
            throw located(error.mirrorError(file: path(name)))
        }
        disk.journalSeen = disk.journalEnd
    }

    /// Whether `snapshot.json` is no longer the file the state was loaded from.
    private func snapshotChanged(_ disk: Disk) -> Bool {
        let current = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.snapshotFile)
        guard let current, let loaded = disk.snapshot else { return (current == nil) != (disk.snapshot == nil) }
        return current.inode != loaded.inode || current.device != loaded.device
    }

    /// Opens the current generation's journal, creating it if asked.
    ///
    /// - Returns: Whether the journal is open.
    @discardableResult
    func openJournal(_ disk: inout Disk, create: Bool) throws(MirrorError) -> Bool {
        if disk.journalFD >= 0 { return true }
        let name = JSONFileFormat.journalFile(disk.generation)
        do throws(FileSystem.Failure) {
            (disk.journalFD, disk.journalWritable) = try fileSystem.openWritableOrReadOnly(
                at: disk.directoryFD, name, flags: O_APPEND | (create ? O_CREAT : 0), mode: fileMode)
        } catch {
            if error.code == ENOENT && !create { return false }
            throw located(openError(error, name))
        }
        if create && disk.journalWritable {
            // The new file's directory entry must be durable before commits in it are.
            do throws(FileSystem.Failure) {
                try fileSystem.sync(disk.directoryFD, metadata: true)
            } catch {
                close(disk.journalFD)
                disk.journalFD = -1
                throw located(error.mirrorError(file: directoryPath))
            }
        }
        disk.journalEnd = 0
        disk.journalSeen = 0
        return true
    }

    /// Reads the snapshot and the whole journal again and replaces the state, telling
    /// subscribers about differences made by other writers.
    private func reload(_ disk: inout Disk, underLock: Bool) throws(MirrorError) -> [RemoteNotification] {
        // Snapshot and journal must belong together: if a compaction replaced the snapshot
        // while we opened them, start again.
        var attempts = 0
        var snapshotFD: Int32 = -1
        var snapshotInfo: JSONFileIO.FileInfo?
        var contents = JSONFileFormat.SnapshotContents()
        var snapshotBytes: [UInt8] = []
        var journalFD: Int32 = -1
        var journalWritable = false
        var generation = 0
        while true {
            attempts += 1
            (snapshotFD, snapshotInfo, snapshotBytes) = try openSnapshot(disk.directoryFD)
            do throws(MirrorError) {
                contents = try parseSnapshot(snapshotBytes)
            } catch {
                if snapshotFD >= 0 { close(snapshotFD) }
                throw error
            }
            if snapshotFD < 0 {
                // No snapshot: generation 0, unless someone removed the snapshot of a
                // compacted zone; then its journal is the best there is.
                generation = inferredGeneration(disk.directoryFD)
            } else {
                generation = contents.header?.generation ?? inferredGeneration(disk.directoryFD)
            }
            let name = JSONFileFormat.journalFile(generation)
            do {
                (journalFD, journalWritable) = try fileSystem.openWritableOrReadOnly(
                    at: disk.directoryFD, name, flags: O_APPEND)
            } catch where error.code != ENOENT {
                if snapshotFD >= 0 { close(snapshotFD) }
                throw located(openError(error, name))
            } catch {
                // No journal yet.
            }
            let again = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.snapshotFile)
            let same = again?.inode == snapshotInfo?.inode && again?.device == snapshotInfo?.device
            if same || attempts >= 20 { break }
            if snapshotFD >= 0 { close(snapshotFD) }
            if journalFD >= 0 { close(journalFD) }
            journalFD = -1
        }
        // Bad snapshot lines go to quarantine.
        let snapshotTag = contents.header.map { "\($0.generation)" } ?? "inode\(snapshotInfo?.inode ?? 0)"
        for bad in contents.bad {
            let range = bad.offset..<(bad.offset + bad.length)
            quarantine(
                Array(snapshotBytes[range]), in: disk.directoryFD, name: "quarantine-snapshot-\(snapshotTag)-\(bad.offset).bad",
                source: JSONFileFormat.snapshotFile,
                what: bad.offset == 0
                    ? "the header line of \(JSONFileFormat.snapshotFile) does not decode"
                    : "line at byte \(bad.offset) of \(JSONFileFormat.snapshotFile) does not decode")
        }
        snapshotBytes = []
        if snapshotFD < 0 && generation > 0 {
            let journal = JSONFileFormat.journalFile(generation)
            context.problems.report(
                located(MirrorError(
                    .corruptEntry,
                    "\(path(JSONFileFormat.snapshotFile)) is missing although the zone was compacted; "
                        + "only the changes in \(journal) were loaded",
                    file: path(JSONFileFormat.snapshotFile))),
                key: "missing snapshot \(directoryPath) \(generation)")
        }
        var snapshotClock = HLCTimestamp.zero
        for record in contents.records where record.modified > snapshotClock { snapshotClock = record.modified }
        if snapshotClock > .zero { HybridLogicalClock.shared.observe(snapshotClock) }

        // Swap in the new files.
        for fd in [disk.snapshotFD, disk.journalFD] where fd >= 0 { close(fd) }
        disk.snapshotFD = snapshotFD
        disk.snapshot = snapshotInfo
        disk.generation = generation
        disk.journalFD = journalFD
        disk.journalWritable = journalWritable
        disk.journalEnd = 0
        disk.journalSeen = 0

        var state = ZoneState(
            generation: generation, sequence: contents.header?.sequence ?? 0, records: contents.records)
        contents.records = []
        if journalFD >= 0, let info = JSONFileIO.info(journalFD), info.size > 0 {
            let read = try readJournal(&disk, size: info.size, after: state.token.sequence)
            _ = apply(read, to: &state, notify: false)
        }
        if underLock { try cutTail(&disk) }

        let wasLoaded = disk.loaded
        var old = memory.withLock { current in
            swap(&current, &state)
            return state
        }
        defer { old = ZoneState() }
        guard wasLoaded else { return [] }
        return memory.withLock { new in differences(from: old, to: new) }
    }

    /// Notifications for what changed between two states, ignoring this writer's changes.
    private func differences(from old: borrowing ZoneState, to new: borrowing ZoneState) -> [RemoteNotification] {
        var changed: [StoredRecord] = []
        for (id, record) in new.records where record.writer != context.writerID {
            if old.records[id]?.version != record.version { changed.append(record) }
        }
        for (id, record) in old.records where !record.isDeleted && new.records[id] == nil {
            // Deleted by a writer whose tombstone compaction dropped.
            changed.append(StoredRecord(
                id: id, version: record.version + 1, fields: nil, modified: record.modified, writer: ""))
        }
        guard !changed.isEmpty else { return [] }
        return new.notifications(for: changed, databaseIdentifier: context.identifier, zone: zone, writer: nil)
    }

    private func openSnapshot(
        _ directoryFD: Int32
    ) throws(MirrorError) -> (fd: Int32, info: JSONFileIO.FileInfo?, bytes: [UInt8]) {
        let name = JSONFileFormat.snapshotFile
        let fd: Int32
        do {
            fd = try fileSystem.open(at: directoryFD, name, flags: O_RDONLY | O_NOFOLLOW)
        } catch {
            if error.code == ENOENT { return (-1, nil, []) }
            throw located(openError(error, name))
        }
        do {
            let bytes = try JSONFileIO.readAll(fd)
            return (fd, JSONFileIO.info(fd), bytes)
        } catch {
            close(fd)
            throw located(MirrorError.posix(error.code, "read", file: path(name)))
        }
    }

    private func parseSnapshot(_ bytes: [UInt8]) throws(MirrorError) -> JSONFileFormat.SnapshotContents {
        switch JSONFileFormat.parseSnapshot(bytes) {
        case .success(let contents):
            return contents
        case .failure(.unsupportedFormat(let format)):
            throw located(MirrorError(
                .unsupportedFormat,
                "\(path(JSONFileFormat.snapshotFile)) is in format \(format); this version of MagicMirror "
                    + "reads format \(JSONFileFormat.version) only. Nothing was changed.",
                file: path(JSONFileFormat.snapshotFile)))
        }
    }

    /// The generation to use when the snapshot is missing or its header cannot be read
    /// (see ``JSONFileFormat/inferredGeneration(journalSizes:)``).
    private func inferredGeneration(_ directoryFD: Int32) -> Int {
        JSONFileFormat.inferredGeneration(journalSizes: journalGenerations(directoryFD).map {
            ($0, JSONFileIO.info(at: directoryFD, JSONFileFormat.journalFile($0))?.size ?? 0)
        })
    }

    /// The generations of the journal files in the zone directory.
    func journalGenerations(_ directoryFD: Int32) -> [Int] {
        fileNames(in: directoryFD).compactMap(JSONFileFormat.generation(ofJournal:))
    }

    /// The names of the entries of a directory.
    func fileNames(in directoryFD: Int32) -> [String] {
        let copy = dup(directoryFD)
        guard copy >= 0, let directory = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return []
        }
        defer { closedir(directory) }
        rewinddir(directory)
        var names: [String] = []
        while let entry = readdir(directory) {
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            })
        }
        return names
    }

    // MARK: Quarantine

    /// Keeps bytes that cannot be used in a quarantine file of the zone, once, and reports
    /// them once per engine.
    ///
    /// - Parameters:
    ///   - name: The quarantine file's name; deterministic for entries that stay in place
    ///     (so reloading does not copy them again), unique for cut tails.
    ///   - source: The file the bytes came from.
    func quarantine(
        _ bytes: [UInt8], in directoryFD: Int32, name: String, source: String, what: String
    ) {
        let key = path(name)
        guard !context.problems.wasReported(key) else { return }
        var note = ""
        do {
            let fd = try fileSystem.open(
                at: directoryFD, name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: fileMode)
            defer { close(fd) }
            try fileSystem.write(fd, bytes: bytes)
            try fileSystem.sync(fd)
        } catch {
            if error.code != EEXIST { note = " (could not be written: \(String(cString: strerror(error.code))))" }
        }
        let recordID = Self.likelyRecordID(in: bytes)
        let error = MirrorError(
            .corruptEntry,
            "\(what); its bytes were kept in \(key)\(note) and everything else was loaded",
            recordIDs: recordID.map { [$0] } ?? [],
            recordType: zone.recordType, scope: zone.scope, file: path(source))
        context.problems.report(error, key: key)
    }

    /// The value of an `"id"` key in a damaged line, when one can be seen.
    static func likelyRecordID(in bytes: [UInt8]) -> String? {
        let marker = Array("\"id\":\"".utf8)
        guard bytes.count > marker.count else { return nil }
        var index = 0
        while index + marker.count <= bytes.count {
            if bytes[index..<(index + marker.count)].elementsEqual(marker) {
                let start = index + marker.count
                guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")), end > start else { return nil }
                let id = String(decoding: bytes[start..<end], as: UTF8.self)
                return NameRules.problem(with: id) == nil ? id : nil
            }
            index += 1
        }
        return nil
    }
}
