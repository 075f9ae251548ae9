import Foundation

/// The zone's directories and the files it holds open: created on first use without
/// following symbolic links, with the private scope's modes, and followed when another
/// program moves or replaces them.
extension JSONFileZone {
    /// Opens (creating as needed) the directories from the root to the zone, refusing
    /// symbolic links.
    func openDirectory() throws(MirrorError) -> Int32 {
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
            let fd: Int32
            do {
                fd = try fileSystem.openOrMakeDirectory(at: parent, name, path: path, mode: mode)
            } catch {
                throw located(error)
            }
            if index < components.count - 1 { toClose.append(fd) }
            parent = fd
            // A private user's directories are its alone, whatever made them.
            guard isPrivate, index > 0, let info = JSONFileIO.info(fd), info.mode & 0o777 != mode else { continue }
            do throws(FileSystem.Failure) {
                try fileSystem.changeMode(fd, to: mode)
            } catch {
                if index == components.count - 1 { close(fd) }
                throw located(error.mirrorError(file: path))
            }
        }
        return parent
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

    /// Opens the current generation's journal, creating it if asked.
    ///
    /// - Returns: Whether the journal is open.
    @discardableResult
    func openJournal(_ disk: inout Disk, create: Bool) throws(MirrorError) -> Bool {
        if disk.journalFD >= 0 { return true }
        let name = JSONFileFormat.journalFile(disk.generation)
        do throws(FileSystem.Failure) {
            (disk.journalFD, disk.journalWritable) = try fileSystem.openWritableOrReadOnly(
                at: disk.directoryFD, name, flags: create ? O_CREAT : 0, mode: fileMode)
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
        disk.journalSize = 0
        return true
    }

    /// Whether the zone directory this engine holds open is no longer the one at its path:
    /// another program moved, removed or replaced it.
    private func directoryReplaced(_ disk: Disk) -> Bool {
        guard let held = disk.directoryIdentity else { return false }
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
}
