import Foundation
import Synchronization

/// Loading a zone's files whole: the snapshot and the journal of its generation, read
/// again when another writer compacted, with the differences told to subscribers.
extension JSONFileZone {
    /// How many times a load starts again when the snapshot was replaced (by a compaction
    /// in another process) while it was being read, before it keeps what it read.
    static var snapshotRaceAttempts: Int { 20 }
    /// Reads the snapshot and the whole journal again and replaces the state, telling
    /// subscribers about differences made by other writers.
    func reload(_ disk: inout Disk, underLock: Bool) throws(MirrorError) -> [RemoteNotification] {
        // Snapshot and journal must belong together: if a compaction replaced the snapshot
        // while we opened them, start again.
        var attempts = 0
        var snapshotFD: Int32 = -1
        var snapshotInfo: JSONFileIO.FileInfo?
        var contents = JSONFileFormat.SnapshotContents()
        var journalFD: Int32 = -1
        var journalWritable = false
        var generation = 0
        while true {
            attempts += 1
            (snapshotFD, snapshotInfo, contents) = try openSnapshot(disk.directoryFD)
            if snapshotFD < 0 {
                // No snapshot: generation 0, unless someone removed the snapshot of a
                // compacted zone; then its journal is the best there is.
                generation = inferredGeneration(disk.directoryFD)
            } else {
                generation = contents.header?.generation ?? inferredGeneration(disk.directoryFD)
            }
            let name = JSONFileFormat.journalFile(generation)
            do {
                (journalFD, journalWritable) = try fileSystem.openWritableOrReadOnly(at: disk.directoryFD, name)
            } catch where error.code != ENOENT {
                if snapshotFD >= 0 { close(snapshotFD) }
                throw located(openError(error, name))
            } catch {
                // No journal yet.
            }
            let again = JSONFileIO.info(at: disk.directoryFD, JSONFileFormat.snapshotFile)
            let same = again?.inode == snapshotInfo?.inode && again?.device == snapshotInfo?.device
            if same || attempts >= Self.snapshotRaceAttempts { break }
            if snapshotFD >= 0 { close(snapshotFD) }
            if journalFD >= 0 { close(journalFD) }
            journalFD = -1
        }
        // Bad snapshot lines go to quarantine.
        let snapshotTag = contents.header.map { "\($0.generation)" } ?? "inode\(snapshotInfo?.inode ?? 0)"
        for bad in contents.bad {
            quarantine(
                bad.bytes, in: disk.directoryFD, name: "quarantine-snapshot-\(snapshotTag)-\(bad.offset).bad",
                source: JSONFileFormat.snapshotFile,
                what: bad.offset == 0
                    ? "the header line of \(JSONFileFormat.snapshotFile) does not decode"
                    : "line at byte \(bad.offset) of \(JSONFileFormat.snapshotFile) does not decode")
        }
        contents.bad = []
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
        disk.journalSize = 0

        var state = ZoneState(
            generation: generation, sequence: contents.header?.sequence ?? 0, records: contents.records)
        contents.records = []
        if journalFD >= 0, let info = JSONFileIO.info(journalFD), info.size > 0 {
            try readJournalInPieces(&disk, size: info.size, into: &state, underLock: underLock)
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
                id: id, version: StoredRecord.version(after: record.version), fields: nil, modified: record.modified, writer: ""))
        }
        guard !changed.isEmpty else { return [] }
        return new.notifications(for: changed, databaseIdentifier: context.identifier, zone: zone, writer: nil)
    }

    /// Opens and reads the snapshot, a piece at a time (see
    /// ``JSONFileFormat/readSnapshot(size:pieceSize:partsFrom:read:)``). No snapshot is descriptor
    /// `-1` and the contents of an empty one.
    private func openSnapshot(
        _ directoryFD: Int32
    ) throws(MirrorError) -> (fd: Int32, info: JSONFileIO.FileInfo?, contents: JSONFileFormat.SnapshotContents) {
        let name = JSONFileFormat.snapshotFile
        let fd: Int32
        do {
            fd = try fileSystem.open(at: directoryFD, name, flags: O_RDONLY | O_NOFOLLOW)
        } catch {
            if error.code == ENOENT { return (-1, nil, JSONFileFormat.SnapshotContents(header: (0, 0))) }
            throw located(openError(error, name))
        }
        do throws(JSONFileFormat.SnapshotReadFailure) {
            guard let info = JSONFileIO.info(fd) else { throw .read(FileSystem.Failure(operation: .open, code: errno)) }
            let spill = FieldsSpill.target(forReading: info.size, fileSystem: fileSystem, directory: directoryFD)
            let contents = try JSONFileFormat.readSnapshot(size: info.size, spill: spill) { buffer, offset throws(FileSystem.Failure) in
                try JSONFileIO.read(fd, into: buffer, at: offset)
            }
            return (fd, info, contents)
        } catch {
            close(fd)
            switch error {
            case .read(let failure):
                throw located(MirrorError.posix(failure.code, "read", file: path(name)))
            case .problem(.unsupportedFormat(let format)):
                throw located(MirrorError(
                    .unsupportedFormat,
                    "\(path(name)) is in format \(format); this version of MagicMirror "
                        + "reads format \(JSONFileFormat.version) only. Nothing was changed.",
                    file: path(name)))
            }
        }
    }

    /// How many bytes of a journal a load reads at a time (more when one append is larger).
    static let journalPieceSize = 4 << 20

    /// Reads the journal from its start to `size` into `state`, a piece of
    /// ``JSONFileContext/journalPieceSize`` bytes at a time, each from the end of the last
    /// complete append read (as a later read of what other writers appended does), so that
    /// a large journal is never in memory whole: only one piece, beside the state.
    ///
    /// A piece that holds no complete append (one append larger than it) is read again twice
    /// as large. A piece with lines that belong to no complete append ends the load early,
    /// as a whole read would (``readJournal(_:size:after:underLock:spillingFor:)``). Whether
    /// the fields are spilled is decided for the whole journal, not for each piece.
    /// The state makes room once for the records the whole journal would hold at the first
    /// piece's rate (growing piece by piece would double its table, and could leave room for
    /// up to twice as many).
    private func readJournalInPieces(
        _ disk: inout Disk, size: Int, into state: inout ZoneState, underLock: Bool
    ) throws(MirrorError) {
        var pieceSize = max(context.journalPieceSize, 1)
        var madeRoom = false
        while true {
            let start = disk.journalEnd
            let end = size - start <= pieceSize ? size : start + pieceSize
            let read = try readJournal(
                &disk, size: end, after: state.token.sequence, underLock: underLock, spillingFor: size)
            let records = read.commits.reduce(0) { $0 + $1.records.count }
            if !madeRoom, records > 0 {
                let expected = end == size ? records : records * (size - start) / max(disk.journalEnd - start, 1)
                state.reserveCapacity(state.records.count + expected + expected / 16)
                madeRoom = true
            }
            _ = apply(read, to: &state, notify: false)
            // Lines that belong to no complete append, read without the lock: the read was
            // cut short at the last complete append, and what follows is read on the next
            // pass (see `readJournal`), as after a read of the whole journal.
            if end == size || (read.orphaned && !underLock) { return }
            if disk.journalEnd == start { pieceSize *= 2 }
        }
    }

    /// The generation to use when the snapshot is missing or its header cannot be read
    /// (see ``JSONFileFormat/inferredGeneration(journalSizes:)``).
    private func inferredGeneration(_ directoryFD: Int32) -> Int {
        JSONFileFormat.inferredGeneration(journalSizes: journalGenerations(directoryFD).map {
            ($0, JSONFileIO.info(at: directoryFD, JSONFileFormat.journalFile($0))?.size ?? 0)
        })
    }
}
