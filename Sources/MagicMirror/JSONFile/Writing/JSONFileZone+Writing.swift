import Dispatch
import Foundation
import Synchronization

/// Writing a batch of commits: under the writers' lock, after catching up, each commit is
/// checked against the state, and every one that writes goes into one append (and one
/// `fsync`), which is cut back off the journal if it fails.
extension JSONFileZone {

    /// What to do with one commit of a batch.
    private enum Plan {
        /// An operation conflicted: nothing is written.
        case conflict(CommitOutcome)
        /// Every operation is a retry of a stored change: nothing is written.
        case unchanged([StoredRecord?])
        /// Append these records as commit `sequence`.
        case write(prepared: [StoredRecord?], changed: [StoredRecord], sequence: Int)
        /// The commit would write but cannot: nothing is written.
        case refused(MirrorError)
    }

    /// Writes one batch under the writers' lock and completes its commits.
    ///
    /// - Parameter mayWait: Whether to wait for the writers' lock; when `false` and another
    ///   writer holds it, nothing is done and the result is `nil`.
    /// - Returns: The results of the first commits of the batch, and the rest, held back
    ///   for the next batch because they touch a record an earlier commit of the batch
    ///   touches (each commit of a batch is checked against the state before the batch,
    ///   which is only right for commits on distinct records).
    func process(
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
                            // A journal that another program wrote up to the last sequence
                            // takes no more commits; one up from it trapped.
                            guard sequence < .max else {
                                return .refused(MirrorError(
                                    .refused,
                                    "zone \(zone) is at the last commit sequence (\(sequence)): it takes no more commits; copy its records into a new zone"))
                            }
                            sequence += 1
                            return .write(prepared: prepared, changed: changed, sequence: sequence)
                        }
                    }
                }

                // Encode and append every commit that writes, at once.
                // Only the append's very last line is marked: readers apply nothing of an
                // append that did not reach its end.
                // Sized once: a large batch's buffer grown by doubling copied and faulted in
                // about twice its size (perf: a third of a 100,000-record commit).
                let storedCount = plans.reduce(0) { count, plan in
                    guard case .write(_, let changed, _) = plan else { return count }
                    return count + changed.count
                }
                var lines = JSONFileFormat.JournalAppend(capacity: plans.reduce(0) { size, plan in
                    guard case .write(_, let changed, _) = plan else { return size }
                    return changed.reduce(size) { $0 + JSONFileFormat.journalLineCapacity(for: $1) }
                })
                var durable = false
                let lastWriting = plans.lastIndex { if case .write = $0 { true } else { false } }
                for (index, plan) in plans.enumerated() {
                    guard case .write(_, let changed, let sequence) = plan else { continue }
                    if index == lastWriting {
                        lines.add(sequence: sequence, records: changed.dropLast())
                        lines.add(sequence: sequence, record: changed[changed.count - 1], isLast: true)
                    } else {
                        lines.add(sequence: sequence, records: changed[...])
                    }
                    durable = durable || accepted[index].durable
                }
                var writeError: MirrorError?
                /// The state with every commit of the batch applied, and their results,
                /// made on the other core while a large append is written and flushed (for
                /// a small one, handing work to another thread costs more than it saves);
                /// used only when the append succeeds.
                var appliedAlongside: (state: ZoneState, applied: AppliedPlans)?
                if lines.count > 0 {
                    // Consumed, so that sealing writes into the only reference to the bytes
                    // rather than a copy of them.
                    let parts = (consume lines).sealed()
                    func write() {
                        do throws(MirrorError) {
                            try append(&disk, parts, durable: durable)
                        } catch {
                            writeError = error
                        }
                    }
                    // Applied to a copy of the state, which costs a copy of its table: worth
                    // it while the table is no larger than what the batch adds to it.
                    if storedCount >= JSONFileFormat.linesBuiltInParallel,
                       memory.withLock({ $0.records.count }) <= storedCount
                    {
                        let requests = accepted
                        appliedAlongside = BatchJSONCoding.run(write) {
                            var state = memory.withLock { $0 }
                            let applied = apply(plans, of: requests, to: &state, writer: writerID)
                            return (state, applied)
                        }
                    } else {
                        write()
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
                    let applied: AppliedPlans
                    if let writeError {
                        applied = failing(plans, of: accepted, with: writeError, in: state)
                    } else if let (next, made) = appliedAlongside.take() {
                        state = next
                        applied = made
                    } else {
                        applied = apply(plans, of: accepted, to: &state, writer: writerID)
                    }
                    results = applied.results
                    notifications += applied.notifications
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

    /// The results of a batch's commits once applied, and the notifications they make.
    struct AppliedPlans {
        var results: [Result<CommitOutcome, MirrorError>]
        var notifications: [RemoteNotification]
    }

    /// Applies the commits of a written batch to `state`, in order, with what each returns
    /// and tells subscribers.
    private func apply(
        _ plans: [Plan], of requests: [CommitRequest], to state: inout ZoneState, writer: String
    ) -> AppliedPlans {
        var applied = AppliedPlans(results: [], notifications: [])
        applied.results.reserveCapacity(plans.count)
        for (index, plan) in plans.enumerated() {
            let operations = requests[index].operations
            switch plan {
            case .conflict(let outcome):
                applied.results.append(.success(outcome))
            case .refused(let error):
                applied.results.append(.failure(error.adding(recordIDs: operations.map(\.recordID))))
            case .unchanged(let prepared):
                applied.results.append(.success(state.outcome(for: prepared, of: operations)))
            case .write(let prepared, let changed, let sequence):
                state.apply(changed, sequence: sequence)
                applied.results.append(.success(state.outcome(for: prepared, of: operations)))
                applied.notifications += state.notifications(
                    for: changed, databaseIdentifier: context.identifier, zone: zone, writer: writer)
            }
        }
        return applied
    }

    /// The results of a batch whose append failed with `error`: its writing commits fail,
    /// the others are answered from `state`, which is left as it was.
    private func failing(
        _ plans: [Plan], of requests: [CommitRequest], with error: MirrorError, in state: ZoneState
    ) -> AppliedPlans {
        let results = plans.enumerated().map { index, plan -> Result<CommitOutcome, MirrorError> in
            let operations = requests[index].operations
            switch plan {
            case .conflict(let outcome): return .success(outcome)
            case .refused(let refusal): return .failure(refusal.adding(recordIDs: operations.map(\.recordID)))
            case .unchanged(let prepared): return .success(state.outcome(for: prepared, of: operations))
            case .write: return .failure(error.adding(recordIDs: operations.map(\.recordID)))
            }
        }
        return AppliedPlans(results: results, notifications: [])
    }

    /// Appends `parts`, one after the other, to the journal (creating it if needed) and
    /// flushes it when `durable`. On failure the journal is cut back to where it was, so
    /// nothing of the failed append is ever read.
    ///
    /// The bytes go where the journal's data ends, over the spaces reserved there when the
    /// file has them: the flush then writes data only, not a new file size as well. An
    /// append that would grow the file reserves ``JSONFileFormat/journalReserve`` more bytes
    /// of spaces past itself, in the same `write`. Written in place, an append can be seen
    /// with a hole (a reader copying one page before the write reaches it and the next one
    /// after; blocks reaching the disk out of order in a power loss): the checksum in its
    /// last line (``JSONFileFormat/JournalAppend``) tells readers it is not whole.
    ///
    /// In a database of format 1 (``JSONFileContext/reservesJournalSpace`` is `false`),
    /// processes of versions that do not check the sum may read the journal: spaces after the
    /// data are cut first and the bytes go at the end of the file, reserving nothing, so a
    /// reader only ever sees a prefix of an append, and a new size for every one.
    ///
    /// - Throws: An error marked ``MirrorError/nothingStored`` when the append failed before
    ///   its bytes were complete in the file and they were cut off again; otherwise (the
    ///   flush failed after the bytes were in place, so other processes may have read them,
    ///   or they could not be cut off) an error that may have stored them.
    func append(_ disk: inout Disk, _ parts: [[UInt8]], durable: Bool) throws(MirrorError) {
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
        let count = parts.reduce(0) { $0 + $1.count }
        var written = count
        let reserves = context.reservesJournalSpace
        do throws(FileSystem.Failure) {
            if !reserves && disk.journalSize > start {
                try fileSystem.truncate(fd, to: start)
                disk.journalSize = start
            }
            guard lseek(fd, off_t(start), SEEK_SET) == off_t(start) else {
                throw FileSystem.Failure(operation: .write, code: errno)
            }
            if reserves && start + count > disk.journalSize && count < JSONFileFormat.journalReserve {
                var reserving = Array(parts.joined())
                reserving.append(contentsOf: repeatElement(JSONFileFormat.reservedByte, count: JSONFileFormat.journalReserve))
                written = reserving.count
                try fileSystem.write(fd, bytes: reserving)
            } else {
                for part in parts { try fileSystem.write(fd, bytes: part) }
            }
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
                disk.journalSize = start
                failure.nothingStored = !disk.appendWasVisible
            } catch {
                disk.mustTruncateTo = start
            }
            throw failure
        }
        disk.journalEnd = start + count
        disk.journalSeen = disk.journalEnd
        disk.journalSize = max(disk.journalSize, start + written)
        try confirmAppend(disk, parts, count: count, at: start)
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
            fd = try fileSystem.open(at: disk.directoryFD, name, flags: O_RDWR | O_NOFOLLOW)
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
}
