import Foundation

/// Checks that the files a zone holds open are still the files at their names.
///
/// Other programs can replace a file (an editor's `sed -i` writes a new file and renames it
/// over the old one) or remove it (`rm lock`) while this process holds a descriptor of the
/// old one. Writing on through that descriptor loses data silently, so the writers' lock and
/// the journal are checked by identity (device and inode) under the lock, before every
/// append and before a compaction's rename.
extension JSONFileZone {
    /// How many times a writer reopens `lock` when it keeps finding a new file at that name.
    static let lockReopenLimit = 100

    /// Takes the writers' lock on the file named `lock` now.
    ///
    /// A lock taken on a file that was removed or replaced since it was opened excludes no
    /// one: a writer that opens the name anew locks another file. So after `flock`, the
    /// locked file is compared with the one at the name; when they differ, the lock is let go
    /// and the name opened again.
    ///
    /// - Parameter mayWait: Whether to wait when another writer holds the lock.
    /// - Returns: The locked descriptor, or `nil` when `mayWait` is `false` and another
    ///   writer holds the lock.
    func lockWriters(_ disk: inout Disk, mayWait: Bool) throws(MirrorError) -> Int32? {
        for _ in 0..<Self.lockReopenLimit {
            let lockFD = try openLock(&disk)
            let code = mayWait ? FileLock.lock(lockFD) : FileLock.tryLock(lockFD)
            if code == EWOULDBLOCK { return nil }
            guard code == 0 else {
                throw located(MirrorError.posix(code, "flock", file: path(JSONFileFormat.lockFile)))
            }
            if lockIsStillNamed(disk) { return lockFD }
            FileLock.unlock(lockFD)
            close(lockFD)
            disk.lockFD = -1
        }
        throw located(MirrorError(
            .ioFailure,
            "\(path(JSONFileFormat.lockFile)) keeps being removed or replaced by another program; "
                + "nothing was written", file: path(JSONFileFormat.lockFile)))
    }

    /// Whether the lock file this engine holds open is the file named `lock`.
    func lockIsStillNamed(_ disk: Disk) -> Bool {
        guard let held = disk.lockIdentity,
              let named = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.lockFile)
        else { return false }
        return held == named.identity
    }

    /// Throws when the lock this writer holds stopped being the file named `lock` (another
    /// program removed or replaced it), so that another writer may now hold the new one.
    ///
    /// Called right before writing, so that a writer never appends or renames without
    /// mutual exclusion. The commit fails with a transient error and is retried.
    func requireLockStillNamed(_ disk: Disk) throws(MirrorError) {
        guard !lockIsStillNamed(disk) else { return }
        throw located(MirrorError(
            .ioFailure,
            "\(path(JSONFileFormat.lockFile)) was removed or replaced by another program while this "
                + "writer held it; nothing was written, and the change will be retried",
            file: path(JSONFileFormat.lockFile)))
    }

    /// Throws when the journal this writer holds open stopped being the file at its name,
    /// so that nothing is appended to a file no one will read. The commit fails with a
    /// transient error; its retry repairs the journal under the lock and writes there.
    func requireJournalStillNamed(_ disk: Disk) throws(MirrorError) {
        guard journalWasReplaced(disk) else { return }
        let name = JSONFileFormat.journalFile(disk.generation)
        throw located(MirrorError(
            .ioFailure,
            "\(path(name)) was replaced or removed by another program; nothing was written, and the "
                + "change will be retried", file: path(name)))
    }

    /// After an append (`parts`, `count` bytes in all), when the lock stopped being the file
    /// named `lock` while it was written: throws unless the appended bytes are in the journal at its name, where they
    /// were written. (Another writer that took the new lock meanwhile may have cut them as
    /// an unfinished append.)
    func confirmAppend(_ disk: Disk, _ parts: [[UInt8]], count: Int, at start: Int) throws(MirrorError) {
        guard !lockIsStillNamed(disk) else { return }
        let name = JSONFileFormat.journalFile(disk.generation)
        let found = (try? JSONFileIO.read(disk.journalFD, from: start, count: count)) ?? []
        guard journalWasReplaced(disk) || !found.elementsEqual(parts.joined()) else { return }
        throw located(MirrorError(
            .ioFailure,
            "\(path(JSONFileFormat.lockFile)) was removed by another program while this writer appended to "
                + "\(path(name)), and the append is not there as written; the change will be retried",
            file: path(name)))
    }

    /// Whether the journal this engine holds open is no longer the file at its name.
    func journalWasReplaced(_ disk: Disk) -> Bool {
        guard let held = disk.journalIdentity else { return false }
        guard let named = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.journalFile(disk.generation)) else {
            return true
        }
        return held != named.identity
    }

    /// Repairs a journal that another program replaced or removed, under the writers' lock,
    /// before the zone reloads from the files.
    ///
    /// Commits appended after the other program read the old file are missing from the new
    /// one. When the new file holds exactly the beginning of what this engine had read (an
    /// editor rewrote the same bytes; the file was removed), the missing end is appended to
    /// it again, so nothing acknowledged is lost. Otherwise the file's content was changed:
    /// the new file is taken as it is, and the old content is kept in quarantine and
    /// reported.
    func repairReplacedJournal(_ disk: inout Disk) throws(MirrorError) {
        let name = JSONFileFormat.journalFile(disk.generation)
        // All of the old file, not just what this engine read: other writers may have
        // appended to it too before they noticed. Under the lock no one appends to it now.
        let oldSize = JSONFileIO.info(disk.journalFD)?.size ?? disk.journalEnd
        // Their reserved tails (spaces) are not data.
        let old = Self.withoutReservedTail((try? JSONFileIO.read(disk.journalFD, from: 0, count: oldSize)) ?? [])
        var new: [UInt8] = []
        if let fd = try? fileSystem.open(at: disk.directoryFD, name, flags: O_RDONLY | O_NOFOLLOW) {
            defer { close(fd) }
            let size = JSONFileIO.info(fd)?.size ?? 0
            new = Self.withoutReservedTail((try? JSONFileIO.read(fd, from: 0, count: size)) ?? [])
        }
        let common = min(old.count, new.count)
        let samePrefix = old[..<common].elementsEqual(new[..<common])
        // The new file holds all that was read (another writer already repaired it).
        if samePrefix && new.count >= old.count { return }
        if samePrefix {
            let missing = Array(old[new.count...])
            do throws(FileSystem.Failure) {
                let fd = try fileSystem.open(
                    at: disk.directoryFD, name, flags: O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, mode: fileMode)
                defer { close(fd) }
                try fileSystem.truncate(fd, to: new.count)
                try fileSystem.write(fd, bytes: missing)
                try fileSystem.sync(fd)
                try fileSystem.sync(disk.directoryFD, metadata: true)
            } catch {
                throw located(error.mirrorError(file: path(name)))
            }
            context.problems.report(
                located(MirrorError(
                    .corruptEntry,
                    "\(path(name)) was replaced or removed by another program; the \(missing.count) bytes of "
                        + "committed changes the new file lacked were appended to it again, and nothing was lost",
                    file: path(name))),
                key: "journal restored \(path(name)) \(UUID().uuidString)")
            return
        }
        let stamp = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        quarantine(
            old, in: disk.directoryFD, name: "quarantine-journal-\(disk.generation)-replaced-\(stamp).bad",
            source: name,
            what: "\(name) was replaced by another program with different content; the zone now reads the "
                + "new file, and the \(old.count) bytes of the previous journal (changes committed before "
                + "the replacement may be among them)")
    }

    /// `bytes` of a journal without its reserved tail.
    static func withoutReservedTail(_ bytes: [UInt8]) -> [UInt8] {
        let end = bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { JSONFileFormat.dataEnd($0, count: buffer.count) } ?? 0
        }
        return Array(bytes[..<end])
    }

    /// Removes snapshot temporaries that writers which died in a compaction left behind.
    /// Only called under the writers' lock, when no other writer is writing one.
    func removeStaleSnapshotTemporaries(in directoryFD: Int32) {
        for name in fileNames(in: directoryFD) where name.hasPrefix(JSONFileFormat.snapshotTemporaryFile) {
            try? fileSystem.unlink(at: directoryFD, name)
        }
    }
}
