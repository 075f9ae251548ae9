import Dispatch
import Foundation
import Synchronization

/// Compaction: a new snapshot of the live records and the next generation's journal,
/// written crash-safe under the writers' lock, automatically when the journal outgrows the
/// snapshot and on request.
extension JSONFileZone {
    /// Compacts the zone on a background thread, once at a time.
    func scheduleCompaction(threshold: Int) {
        guard compactionScheduled.compareExchange(
            expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        backgroundWork.enter()
        DispatchQueue.global(qos: .utility).async {
            defer {
                self.compactionScheduled.store(false, ordering: .releasing)
                self.backgroundWork.leave()
            }
            do throws(MirrorError) {
                try self.compact(ifLargerThan: threshold)
            } catch {
                let stamp = UUID().uuidString
                self.context.problems.report(
                    MirrorError(
                        error.kind, "automatic compaction failed, the journal keeps growing: \(error.message)",
                        recordType: self.zone.recordType, scope: self.zone.scope, file: error.file,
                        underlying: error.underlying ?? error),
                    key: "compaction \(stamp)")
            }
        }
    }

    /// Returns once no automatic compaction is scheduled or running.
    func waitForBackgroundWork() async {
        await withCheckedContinuation { continuation in
            backgroundWork.notify(queue: .global()) { continuation.resume() }
        }
    }

    /// Writes a new snapshot of the live records and starts the next generation's journal.
    ///
    /// - Parameter threshold: Compact only when the journal is larger than both the
    ///   snapshot and this many bytes; `nil` to compact unconditionally.
    func compact(ifLargerThan threshold: Int?) throws(MirrorError) {
        let notifications = try disk.withLock { disk throws(MirrorError) -> [RemoteNotification] in
            var notifications = try ensureLoaded(&disk)
            notifications += try followReplacedDirectory(&disk)
            guard let lockFD = try lockWriters(&disk, mayWait: true) else { return notifications }
            defer { FileLock.unlock(lockFD) }
            notifications += try synchronize(&disk, underLock: true)
            if let threshold, disk.journalEnd <= max(disk.snapshot?.size ?? 0, threshold) {
                return notifications
            }
            try writeCompaction(&disk)
            return notifications
        }
        deliver(notifications)
        catchUpIfRequested()
    }

    /// The compaction itself, under the writers' lock. Crash-safe at every step: until the
    /// rename, the old snapshot and journal are untouched; after it, the new snapshot holds
    /// every commit and the new journal exists.
    ///
    /// 1. create `journal-<G+1>.ndjson` (empty, the old journal's mode), fsync;
    /// 2. write `snapshot.json.tmp` (the old snapshot's mode), fsync;
    /// 3. rename it over `snapshot.json`; fsync the directory;
    /// 4. remove older journals.
    func writeCompaction(_ disk: inout Disk) throws(MirrorError) {
        let directoryFD = disk.directoryFD
        let oldGeneration = disk.generation
        let newGeneration = oldGeneration + 1
        let journalName = JSONFileFormat.journalFile(newGeneration)
        // A name of this writer's own: two writers never share a temporary file, even when
        // another program removed the lock file between them.
        let temporaryName = JSONFileFormat.snapshotTemporaryFile + "-" + context.writerID
        let journalMode = disk.journalFD >= 0 ? JSONFileIO.info(disk.journalFD)?.mode : nil
        let snapshotMode = (disk.snapshotFD >= 0 ? JSONFileIO.info(disk.snapshotFD)?.mode : nil) ?? journalMode
        let (records, token) = memory.withLock { ($0.liveRecords, $0.token) }

        var newJournal: Int32 = -1
        var newSnapshot: Int32 = -1
        var renamed = false
        defer {
            if !renamed {
                if newJournal >= 0 {
                    close(newJournal)
                    try? fileSystem.unlink(at: directoryFD, journalName)
                }
                if newSnapshot >= 0 {
                    close(newSnapshot)
                    try? fileSystem.unlink(at: directoryFD, temporaryName)
                }
            }
        }
        var currentFile = journalName
        do {
            newJournal = try fileSystem.open(
                at: directoryFD, journalName, flags: O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW,
                mode: fileMode)
            if let journalMode { try fileSystem.changeMode(newJournal, to: journalMode) }
            try fileSystem.sync(newJournal)

            currentFile = temporaryName
            newSnapshot = try fileSystem.open(
                at: directoryFD, temporaryName, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: fileMode)
            if let snapshotMode { try fileSystem.changeMode(newSnapshot, to: snapshotMode) }
            var writer = JSONByteWriter(capacity: 1 << 20 + 4096)
            JSONFileFormat.appendSnapshotHeader(
                to: &writer, generation: newGeneration, sequence: token.sequence, count: records.count)
            for (index, record) in records.enumerated() {
                JSONFileFormat.appendSnapshotRecord(to: &writer, record: record)
                writer.append(index == records.count - 1 ? "\n" : ",\n")
                if writer.count >= 1 << 20 {
                    let fd = newSnapshot
                    try fileSystem.write(fd, bytes: writer.bytes)
                    writer.removeAll()
                    // The spilled fields written so far need not stay mapped in.
                    MappedBytes.releaseResidentPages()
                }
            }
            writer.append(JSONFileFormat.snapshotFooter)
            let fd = newSnapshot
            try fileSystem.write(fd, bytes: writer.bytes)
            try fileSystem.sync(newSnapshot)

            currentFile = JSONFileFormat.snapshotFile
            try requireLockStillNamed(disk)
            try fileSystem.rename(at: directoryFD, temporaryName, to: JSONFileFormat.snapshotFile)
            renamed = true
        } catch let error as FileSystem.Failure {
            throw located(error.mirrorError(file: path(currentFile)))
        } catch let error as MirrorError {
            throw error
        } catch {
            throw located(MirrorError(.ioFailure, "\(error)", file: path(currentFile)))
        }
        removeStaleSnapshotTemporaries(in: directoryFD)

        // The new generation is in place; what follows only tidies up.
        let directorySynced = (try? fileSystem.sync(directoryFD, metadata: true)) != nil
        if directorySynced {
            for generation in journalGenerations(directoryFD) where generation < newGeneration {
                try? fileSystem.unlink(at: directoryFD, JSONFileFormat.journalFile(generation))
            }
        }
        for fd in [disk.snapshotFD, disk.journalFD] where fd >= 0 { close(fd) }
        disk.snapshotFD = newSnapshot
        disk.snapshot = JSONFileIO.info(newSnapshot)
        disk.generation = newGeneration
        disk.journalFD = newJournal
        disk.journalWritable = true
        disk.journalEnd = 0
        disk.journalSeen = 0
        disk.journalSize = 0
        disk.mustTruncateTo = nil
        memory.withLock { $0.compact(toGeneration: newGeneration) }
    }
}
