#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Synchronization

/// Commits (group commit: one append and one `fsync` for every commit waiting in this
/// process) and compaction.
extension JSONFileZone {
    /// Commits validated operations; returns once they are appended (and flushed, when
    /// `durable`) and subscribers were told.
    ///
    /// A commit that finds no flusher running writes itself, on its own thread, with no
    /// continuation and no thread hop. Commits that arrive while a flusher writes wait in
    /// the queue and go together in its next append (group commit).
    func commit(
        _ operations: [RecordOperation], durable: Bool, compactionThreshold: Int
    ) async throws -> CommitOutcome {
        try MirrorError.beforeStoring { () throws(MirrorError) in try load() }
        let leads = queue.withLock { queue -> Bool in
            if queue.flushing { return false }
            queue.flushing = true
            return true
        }
        if leads {
            let request = CommitRequest(
                operations: operations, durable: durable, compactionThreshold: compactionThreshold,
                continuation: nil)
            if let (results, _) = process([request], mayWait: false) {
                finishLeading()
                return try results[0].get()
            }
            // Another process holds the zone: wait on a dispatch thread, not on this one.
            return try await withCheckedThrowingContinuation { continuation in
                var waiting = request
                waiting.continuation = continuation
                queue.withLock { $0.pending.insert(waiting, at: 0) }
                DispatchQueue.global().async { self.runFlusher() }
            }
        }
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(CommitRequest(
                operations: operations, durable: durable, compactionThreshold: compactionThreshold,
                continuation: continuation))
        }
    }

    /// Queues a commit; if the flusher finished meanwhile, starts one on a dispatch thread.
    private func enqueue(_ request: CommitRequest) {
        let (starts, waiting) = queue.withLock { queue -> (Bool, Int) in
            queue.pending.append(request)
            if queue.flushing { return (false, queue.pending.count) }
            queue.flushing = true
            return (true, queue.pending.count)
        }
        if let observer = context.queueObserver.withLock({ $0 }) { observer(zone, waiting) }
        if starts { DispatchQueue.global().async { self.runFlusher() } }
    }

    /// Ends a leader's turn: hands commits that queued meanwhile to a dispatch thread.
    private func finishLeading() {
        let more = queue.withLock { queue -> Bool in
            if queue.pending.isEmpty {
                queue.flushing = false
                return false
            }
            return true
        }
        if more { DispatchQueue.global().async { self.runFlusher() } }
    }

    /// Drains the queue, on a dispatch thread.
    private func runFlusher() {
        while true {
            let batch = queue.withLock { queue -> [CommitRequest] in
                if queue.pending.isEmpty {
                    queue.flushing = false
                    return []
                }
                defer { queue.pending.removeAll() }
                return queue.pending
            }
            if batch.isEmpty { return }
            guard let (results, leftover) = process(batch, mayWait: true) else {
                queue.withLock { $0.pending.insert(contentsOf: batch, at: 0) }
                continue
            }
            for (index, result) in results.enumerated() {
                batch[index].continuation?.resume(with: result.mapError { $0 as any Error })
            }
            queue.withLock { $0.pending.insert(contentsOf: leftover, at: 0) }
        }
    }

    /// What to do with one commit of a batch.
    private enum Plan {
        /// An operation conflicted: nothing is written.
        case conflict(CommitOutcome)
        /// Every operation is a retry of a stored change: nothing is written.
        case unchanged([StoredRecord?])
        /// Append these records as commit `sequence`.
        case write(prepared: [StoredRecord?], changed: [StoredRecord], sequence: Int)
    }

    /// Writes one batch under the writers' lock and completes its commits.
    ///
    /// - Parameter mayWait: Whether to wait for the writers' lock; when `false` and another
    ///   writer holds it, nothing is done and the result is `nil`.
    /// - Returns: The results of the first commits of the batch, and the rest, held back
    ///   for the next batch because they touch a record an earlier commit of the batch
    ///   touches (each commit of a batch is checked against the state before the batch,
    ///   which is only right for commits on distinct records).
    private func process(
        _ batch: [CommitRequest], mayWait: Bool
    ) -> (results: [Result<CommitOutcome, MirrorError>], leftover: [CommitRequest])? {
        var accepted = batch
        var leftover: [CommitRequest] = []
        if batch.count > 1 {
            var touched = IDSet()
            for (index, request) in batch.enumerated() {
                if request.operations.contains(where: { touched.contains($0.recordID) }) {
                    accepted = Array(batch[..<index])
                    leftover = Array(batch[index...])
                    break
                }
                for operation in request.operations { touched.insert(operation.recordID) }
            }
        }
        var results = [Result<CommitOutcome, MirrorError>](
            repeating: .failure(MirrorError(.cancelled, "not processed")), count: accepted.count)
        var notifications: [RemoteNotification] = []
        var compactionThreshold: Int?
        var busy = false

        disk.withLock { disk in
            do throws(MirrorError) {
                notifications += try ensureLoaded(&disk)
                notifications += try followReplacedDirectory(&disk)
                guard let lockFD = try lockWriters(&disk, mayWait: mayWait) else {
                    busy = true
                    return
                }
                defer { FileLock.unlock(lockFD) }
                notifications += try synchronize(&disk, underLock: true)

                // Check every commit against the state.
                let writerID = context.writerID
                let plans = memory.withLock { state -> [Plan] in
                    var sequence = state.token.sequence
                    return accepted.map { request -> Plan in
                        switch state.prepare(request.operations, writer: writerID) {
                        case .failure(let conflict):
                            return .conflict(conflict.outcome)
                        case .success(let prepared):
                            let changed = prepared.compactMap { $0 }
                            if changed.isEmpty { return .unchanged(prepared) }
                            sequence += 1
                            return .write(prepared: prepared, changed: changed, sequence: sequence)
                        }
                    }
                }

                // Encode and append every commit that writes, at once.
                // Only the append's very last line is marked: readers apply nothing of an
                // append that did not reach its end.
                var lines = JSONByteWriter(capacity: 256)
                var durable = false
                let lastWriting = plans.lastIndex { if case .write = $0 { true } else { false } }
                for (index, plan) in plans.enumerated() {
                    guard case .write(_, let changed, let sequence) = plan else { continue }
                    for (position, record) in changed.enumerated() {
                        JSONFileFormat.appendJournalLine(
                            to: &lines, sequence: sequence, record: record,
                            isLast: index == lastWriting && position == changed.count - 1)
                    }
                    durable = durable || accepted[index].durable
                }
                var writeError: MirrorError?
                if lines.count > 0 {
                    do throws(MirrorError) {
                        try append(&disk, lines.bytes, durable: durable)
                    } catch {
                        writeError = error
                    }
                }
                if writeError != nil, disk.appendWasVisible {
                    // The lines were complete before the flush failed: readers in other
                    // processes may have applied them. A new generation makes them reload.
                    disk.appendWasVisible = false
                    do throws(MirrorError) {
                        try writeCompaction(&disk)
                    } catch {
                        context.problems.report(
                            error, key: "compaction after failed flush \(UUID().uuidString)")
                    }
                }

                // Apply what was written, in order.
                memory.withLock { state in
                    for (index, plan) in plans.enumerated() {
                        let operations = accepted[index].operations
                        switch plan {
                        case .conflict(let outcome):
                            results[index] = .success(outcome)
                        case .unchanged(let prepared):
                            results[index] = .success(state.outcome(for: prepared, of: operations))
                        case .write(let prepared, let changed, let sequence):
                            if let writeError {
                                results[index] = .failure(writeError.adding(recordIDs: operations.map(\.recordID)))
                                continue
                            }
                            state.apply(changed, sequence: sequence)
                            results[index] = .success(state.outcome(for: prepared, of: operations))
                            notifications += state.notifications(
                                for: changed, databaseIdentifier: context.identifier, zone: zone, writer: writerID)
                        }
                    }
                }
                let threshold = accepted.map(\.compactionThreshold).min() ?? Int.max
                if disk.journalEnd > max(disk.snapshot?.size ?? 0, threshold) {
                    compactionThreshold = threshold
                }
            } catch {
                // Thrown before anything was appended (failed appends are `writeError`).
                var failure = error
                failure.nothingStored = true
                for index in results.indices {
                    results[index] = .failure(failure.adding(recordIDs: accepted[index].operations.map(\.recordID)))
                }
            }
        }
        deliver(notifications)
        catchUpIfRequested()
        if busy { return nil }
        if let compactionThreshold { scheduleCompaction(threshold: compactionThreshold) }
        return (results, leftover)
    }

    /// Appends `bytes` to the journal (creating it if needed) and flushes it when
    /// `durable`. On failure the journal is cut back to where it was, so nothing of the
    /// failed append is ever read.
    ///
    /// - Throws: An error marked ``MirrorError/nothingStored`` when the append failed before
    ///   its bytes were complete in the file and they were cut off again; otherwise (the
    ///   flush failed after the bytes were in place, so other processes may have read them,
    ///   or they could not be cut off) an error that may have stored them.
    private func append(_ disk: inout Disk, _ bytes: [UInt8], durable: Bool) throws(MirrorError) {
        try MirrorError.beforeStoring { () throws(MirrorError) in
            try openJournal(&disk, create: true)
            if !disk.journalWritable {
                try reopenJournalForWriting(&disk)
            }
            try requireLockStillNamed(disk)
            try requireJournalStillNamed(disk)
        }
        let name = JSONFileFormat.journalFile(disk.generation)
        let start = disk.journalEnd
        let fd = disk.journalFD
        do throws(FileSystem.Failure) {
            try fileSystem.write(fd, bytes: bytes)
            if durable {
                disk.appendWasVisible = true
                try fileSystem.sync(fd)
                disk.appendWasVisible = false
            }
        } catch {
            var failure = located(error.mirrorError(file: path(name)))
            do {
                try fileSystem.truncate(fd, to: start)
                try? fileSystem.sync(fd)
                disk.journalSeen = start
                failure.nothingStored = !disk.appendWasVisible
            } catch {
                disk.mustTruncateTo = start
            }
            throw failure
        }
        disk.journalEnd = start + bytes.count
        disk.journalSeen = disk.journalEnd
        try confirmAppend(disk, bytes, at: start)
    }

    /// Opens the journal again for writing, in place of the read-only descriptor it was
    /// opened with when this process could not write it: the permissions may have changed
    /// since (otherwise a process that once met a read-only journal could never write again).
    ///
    /// - Throws: ``MirrorError/Kind/permissionDenied`` (or the kind of the `open` failure)
    ///   when it still cannot be written.
    private func reopenJournalForWriting(_ disk: inout Disk) throws(MirrorError) {
        let name = JSONFileFormat.journalFile(disk.generation)
        let fd: Int32
        do {
            fd = try fileSystem.open(at: disk.directoryFD, name, flags: O_RDWR | O_APPEND | O_NOFOLLOW)
        } catch {
            var failure = error.mirrorError(file: path(name))
            failure.message = "\(path(name)) cannot be written by this process: \(String(cString: strerror(error.code)))"
            throw located(failure)
        }
        guard let old = JSONFileIO.info(disk.journalFD), let new = JSONFileIO.info(fd),
              old.inode == new.inode, old.device == new.device
        else {
            // Another file took its name meanwhile: the next catch-up reloads.
            close(fd)
            throw located(MirrorError(.ioFailure, "\(path(name)) was replaced while it was read", file: path(name)))
        }
        close(disk.journalFD)
        disk.journalFD = fd
        disk.journalWritable = true
    }

    // MARK: Compaction

    /// Compacts the zone on a background thread, once at a time.
    private func scheduleCompaction(threshold: Int) {
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
    private func writeCompaction(_ disk: inout Disk) throws(MirrorError) {
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
                at: directoryFD, journalName, flags: O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW,
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
        disk.mustTruncateTo = nil
        memory.withLock { $0.compact(toGeneration: newGeneration) }
    }
}
