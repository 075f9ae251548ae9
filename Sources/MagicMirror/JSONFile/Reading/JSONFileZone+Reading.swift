import Foundation
import Synchronization

/// Reading a zone: loading it on first use, consistent reads, and catching up with what
/// other writers appended to the journal since the last look (no lock: a reader reads up
/// to the last complete append).
extension JSONFileZone {
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
            disk.journalSize = length
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
        if size == disk.journalSize && disk.journalSeen == disk.journalEnd && !appendFollows(disk, size: size) {
            return []
        }
        let scan = try readJournal(
            &disk, size: size, after: memory.withLock { $0.token.sequence }, underLock: underLock,
            spillingFor: size - disk.journalEnd)
        let notifications = memory.withLock { state in
            apply(scan, to: &state, notify: true)
        }
        if underLock { try cutTail(&disk) }
        return notifications
    }

    /// Whether an append may have started at `journalEnd` since the journal was last read,
    /// when its size did not change: the byte there is no longer a reserved space (see
    /// ``JSONFileFormat/reservedByte``). One `pread` of one byte, so that a read that finds
    /// nothing new stays cheap.
    private func appendFollows(_ disk: Disk, size: Int) -> Bool {
        guard disk.journalEnd < size else { return false }
        var byte: UInt8 = 0
        return pread(disk.journalFD, &byte, 1, off_t(disk.journalEnd)) != 1 || byte != JSONFileFormat.reservedByte
    }

    /// Reads the journal from `journalEnd` to `size`, reports its bad lines and the commits
    /// that repeat a sequence number already read (`sequence`: the state's), moves the clock
    /// past other writers' readings, and moves `journalEnd` past the last complete append.
    ///
    /// - Parameters:
    ///   - underLock: Whether this engine holds the writers' lock (no append can be under
    ///     way).
    ///   - spillingFor: The size of the read whose records' fields are spilled or not
    ///     (``FieldsSpill/target(forReading:fileSystem:directory:)``): this one's, or the
    ///     whole journal's when it is read in pieces.
    func readJournal(
        _ disk: inout Disk, size: Int, after sequence: Int, underLock: Bool, spillingFor readSize: Int
    ) throws(MirrorError) -> JSONFileFormat.JournalScan {
        let name = JSONFileFormat.journalFile(disk.generation)
        let start = disk.journalEnd
        var bytes = FileBytes(capacity: 0)
        var scan = JSONFileFormat.JournalScan()
        var dataEnd = 0
        // Twice when lines belong to no complete append and the lock is not held: they may be
        // an append written in place that was read as it was written (its checksum did not
        // match). Every byte before the end of the last complete append was written before
        // that append began, so a second read of those bytes only sees them as they stay;
        // lines still left out then are damaged. (What follows is read on the next pass:
        // appends written in place there meanwhile could be read with holes again.)
        var count = size - start
        // The journal kept its size since it was last read, and held only reserved space
        // after its last complete append then: what is new was written in place, from
        // `journalEnd` on, over that space.
        let inPlace = size == disk.journalSize && disk.journalSeen == disk.journalEnd
        var shortened = false
        for _ in 0..<2 {
            do {
                bytes = try readNewBytes(disk.journalFD, from: start, count: count, inPlace: inPlace)
                journalBytesRead.add(bytes.count, ordering: .relaxed)
            } catch {
                throw located(MirrorError.posix(error.code, "read", file: path(name)))
            }
            var parser = JSONFileFormat.LineParser()
            let spill = FieldsSpill.target(forReading: readSize, fileSystem: fileSystem, directory: disk.directoryFD)
            // The bytes stay alive (mapped) while the scan reads them through `base`.
            (scan, dataEnd) = withExtendedLifetime(bytes) { bytes in
                let base = UnsafePointer(bytes.base.assumingMemoryBound(to: UInt8.self))
                let scan = JSONFileFormat.scanJournal(
                    base, count: bytes.count, after: sequence, parser: &parser, spill: spill)
                return (scan, JSONFileFormat.dataEnd(base, count: bytes.count))
            }
            if !scan.orphaned || underLock || shortened { break }
            count = scan.consumed
            shortened = true
        }
        if shortened {
            // Look at what follows on the next pass.
            catchUpRequested.store(true, ordering: .sequentiallyConsistent)
        }
        // Lines left in place but not applied: kept in quarantine once, named by their offset.
        let (directoryFD, generation) = (disk.directoryFD, disk.generation)
        func keep(_ offset: Int, _ length: Int, _ what: String) {
            quarantine(
                Array(bytes.buffer[offset..<(offset + length)]), in: directoryFD,
                name: "quarantine-journal-\(generation)-\(start + offset).bad", source: name, what: what)
        }
        for bad in scan.bad {
            keep(bad.offset, bad.length, "line at byte \(start + bad.offset) of \(name) does not decode")
        }
        for line in scan.setAside {
            keep(
                line.offset, line.length,
                "line at byte \(start + line.offset) of \(name) belongs to an append that does not match its "
                    + "checksum (damaged, or cut short by a power loss), so its commit was not applied")
        }
        for repeated in scan.repeated {
            keep(
                repeated.offset, repeated.length,
                "the commit at byte \(start + repeated.offset) of \(name) repeats sequence number "
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
        disk.journalSeen = start + max(scan.consumed, dataEnd)
        disk.journalSize = size
        return scan
    }

    /// The size of the first piece of a journal read (see
    /// ``readNewBytes(_:from:count:inPlace:)``).
    static let firstJournalPiece = 4096

    /// Reads at most `count` of the journal's bytes from `start`.
    ///
    /// When the journal kept its size since it was last read and nothing but reserved space
    /// followed its last complete append then (`inPlace`), everything past its data was
    /// reserved space (``JSONFileFormat/reservedByte``s, read, or written
    /// by this engine), and other writers of this format append over it from the data's end
    /// on: what they appended since lies at `start`, one line after the other. So only a
    /// first piece is read, and the rest only when the piece does not end in reserved space
    /// (from its last line's end to its own). A reader then reads a small append and a
    /// little space after it, not the whole reserved space after each append (16 KiB,
    /// ``JSONFileFormat/journalReserve``). A journal that grew (a reservation, or a line
    /// that an older writer put at its end) is read to its end.
    private func readNewBytes(
        _ fd: Int32, from start: Int, count: Int, inPlace: Bool
    ) throws(FileSystem.Failure) -> FileBytes {
        let first = min(count, Self.firstJournalPiece)
        guard inPlace, first < count else { return try JSONFileIO.readBytes(fd, from: start, count: count) }
        let bytes = FileBytes(capacity: count)
        bytes.count = try JSONFileIO.read(fd, into: UnsafeMutableRawBufferPointer(start: bytes.base, count: first), at: start)
        guard bytes.count == first else { return bytes }  // the file ends there
        let piece = UnsafeRawBufferPointer(start: bytes.base, count: first)
        var tail = first
        while tail > 0, piece[tail - 1] == JSONFileFormat.reservedByte { tail -= 1 }
        if tail < first, tail == 0 || piece[tail - 1] == UInt8(ascii: "\n") { return bytes }
        bytes.count += try JSONFileIO.read(
            fd, into: UnsafeMutableRawBufferPointer(start: bytes.base + first, count: count - first), at: start + first)
        return bytes
    }

    /// Applies the complete commits of a scan, returning notifications for other writers'.
    func apply(
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

    /// Whether `snapshot.json` is no longer the file the state was loaded from.
    private func snapshotChanged(_ disk: Disk) -> Bool {
        let current = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.snapshotFile)
        guard let current, let loaded = disk.snapshot else { return (current == nil) != (disk.snapshot == nil) }
        return current.inode != loaded.inode || current.device != loaded.device
    }
}
