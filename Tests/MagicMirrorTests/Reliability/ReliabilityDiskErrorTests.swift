#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// Full disks and I/O errors at the `Mirror` level, injected through the database's
/// file-system seam (`ENOSPC`, `EIO`, `EACCES` on `write`, `fsync` and `rename`), and a real
/// read-only directory: no acknowledged change is lost, a failed change stays pending and is
/// retried until it succeeds, and each failure is posted exactly once.
///
/// The database-level cases are in `JSONFileDurabilityTests` (a failed append leaves nothing
/// visible, a failed cut-back is finished by the next writer, a failure creating a zone).
@Suite(.timeLimit(.minutes(10))) struct ReliabilityDiskErrorTests {
    let zone = ZoneID.public("Chore")

    static let appendFailures: [(FileSystem.Operation, Int32, MirrorError.Kind)] = [
        (.write, ENOSPC, .diskFull), (.write, EIO, .ioFailure), (.write, EACCES, .permissionDenied),
        (.fsync, ENOSPC, .diskFull), (.fsync, EIO, .ioFailure), (.fsync, EACCES, .permissionDenied),
    ]

    /// Every id stored in the zone's files (snapshot and current journal) appears once, and
    /// a new process reads `ids`.
    ///
    /// - Returns: How many of `ids` are missing, and how many records are in the files more
    ///   than once.
    @discardableResult
    private func expectStoredOnce(_ ids: [String], in directory: TemporaryDirectory) async throws -> (lost: Int, twice: Int) {
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = try await reader.fetchAll(in: zone).records
        #expect(Set(stored.map(\.id)) == Set(ids))
        #expect(stored.allSatisfy { $0.version == 1 }, "each stored once")
        let (snapshot, journal) = try Reliability.storedLines(in: reader.directory(of: zone))
        let lines = (snapshot + journal).compactMap { $0["id"] as? String }
        #expect(lines.sorted() == ids.sorted(), "each record once in the files")
        return (Set(ids).subtracting(stored.map(\.id)).count, lines.count - Set(lines).count)
    }

    @Test(arguments: appendFailures)
    func aFailedAppendStaysPendingAndIsRetriedUntilItSucceeds(
        operation: FileSystem.Operation, code: Int32, kind: MirrorError.Kind
    ) async throws {
        let directory = try TemporaryDirectory("append-fault")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let mirror = try await Mirror<Chore>(database: database, configuration: quickRetries)
        let acknowledged = Chore(id: "acknowledged-\(UUID().uuidString)", title: "before")
        mirror.dataModel.append(acknowledged)
        try await flush(mirror)

        // Each failure is seen by the notification's observer, on the thread that posts it,
        // before the next attempt can start: the change must be pending then, and the next
        // fault is armed then (so that it hits the next attempt, not the compaction that
        // follows a failed flush).
        let chore = Chore(id: "faulted-\(UUID().uuidString)", title: "during")
        let errors = reliabilityErrors(under: directory.url, orNaming: [chore.id])
        let failures = 3
        let seen = MutexBox<[String]>([])
        let observer = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) {
            guard let error = $0.object as? MirrorError, error.recordIDs.contains(chore.id) else { return }
            let pending = mirror.pendingChanges.first { $0.recordID == chore.id }
            seen.update { $0.append("\(error.kind) attempts=\(pending?.failedAttempts ?? -1)") }
            if seen.value.count < failures { faulty.failNext(operation, errno: code, afterBytes: 40) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let changes = AsyncCollector(mirror.changes())
        faulty.failNext(operation, errno: code, afterBytes: 40)

        mirror.dataModel.append(chore)
        try await changes.wait("the change committed after \(failures) failures") { changes in
            changes.contains { $0.recordID == chore.id && $0.state == .committed }
        }
        #expect(seen.value == (1...failures).map { "\(kind) attempts=\($0)" }, "pending through every failure")
        try await flush(mirror)
        #expect(mirror.pendingChanges.isEmpty)
        #expect(errors.errors.items.map(\.kind) == Array(repeating: kind, count: failures), "one notification per failure")
        #expect(errors.errors.items.allSatisfy { $0.recordIDs == [chore.id] && $0.recordType == "Chore" })
        let check = try await expectStoredOnce([acknowledged.id, chore.id], in: directory)
        Reliability.report("disk-\(operation)-\(kind)", [
            "injected": failures, "notifications": errors.count, "failed-attempts": seen.value.count,
            "records-lost": check.lost, "stored-twice": check.twice,
        ])
    }

    static let renameFailures: [(Int32, MirrorError.Kind)] = [
        (ENOSPC, .diskFull), (EIO, .ioFailure), (EACCES, .permissionDenied),
    ]

    /// Compaction follows a commit once the journal outgrows the snapshot; its `rename`
    /// fails. The commit was acknowledged and stays; the failure is posted once; the next
    /// commit's compaction succeeds with every record.
    @Test(arguments: renameFailures)
    func aFailedCompactionAfterACommitLosesNothing(code: Int32, kind: MirrorError.Kind) async throws {
        let directory = try TemporaryDirectory("rename-fault")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let database = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(compactionThreshold: 64), fileSystem: faulty.fileSystem)
        let mirror = try await Mirror<Chore>(database: database, configuration: quickRetries)
        let errors = reliabilityErrors(under: directory.url)
        let zoneDirectory = database.directory(of: zone)

        faulty.failNext(.rename, errno: code)
        let first = Chore(id: "first-\(UUID().uuidString)", title: "first")
        mirror.dataModel.append(first)
        try await flush(mirror)
        try await database.waitForBackgroundWork(in: zone)
        #expect(faulty.count(.rename) == 1, "a compaction ran")
        #expect(errors.errors.items.map(\.kind) == [kind])
        #expect(errors.errors.items.first?.message.contains("compaction failed") == true)
        #expect(JSONFileTestSupport.names(in: zoneDirectory) == ["journal-0.ndjson", "lock"], "nothing half-made is left")

        let second = Chore(id: "second-\(UUID().uuidString)", title: "second")
        mirror.dataModel.append(second)
        try await flush(mirror)
        try await database.waitForBackgroundWork(in: zone)
        #expect(faulty.count(.rename) == 2, "the next commit compacted again")
        #expect(try await database.currentToken(in: zone).generation == 1)
        #expect(errors.count == 1, "one notification for one failure")
        let check = try await expectStoredOnce([first.id, second.id], in: directory)
        Reliability.report("disk-rename-after-commit-\(kind)", [
            "injected": 1, "notifications": errors.count, "records-lost": check.lost, "stored-twice": check.twice,
        ])
    }

    /// A flush fails after the append was written, so other processes may have read it: the
    /// commit compacts at once to make them reload, and that compaction's `rename` fails too.
    /// Two failures, two notifications; the change is retried and stored once.
    @Test(arguments: renameFailures)
    func aFailedCompactionDuringACommitLosesNothing(code: Int32, kind: MirrorError.Kind) async throws {
        let directory = try TemporaryDirectory("commit-rename-fault")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let mirror = try await Mirror<Chore>(database: database, configuration: quickRetries)
        let acknowledged = Chore(id: "acknowledged-\(UUID().uuidString)", title: "before")
        mirror.dataModel.append(acknowledged)
        try await flush(mirror)
        let chore = Chore(id: "faulted-\(UUID().uuidString)", title: "during")
        let errors = reliabilityErrors(under: directory.url, orNaming: [chore.id])
        let changes = AsyncCollector(mirror.changes())

        faulty.failNext(.fsync, errno: EIO)
        faulty.failNext(.rename, errno: code)
        mirror.dataModel.append(chore)
        try await changes.wait("the change committed") { changes in
            changes.contains { $0.recordID == chore.id && $0.state == .committed }
        }
        try await flush(mirror)
        #expect(faulty.count(.rename) == 1)
        #expect(Set(errors.errors.items.map(\.kind)) == [.ioFailure, kind])
        #expect(errors.count == 2, "the failed flush and the failed compaction, once each: \(errors.errors.items)")
        let check = try await expectStoredOnce([acknowledged.id, chore.id], in: directory)
        Reliability.report("disk-rename-during-commit-\(kind)", [
            "injected": 2, "notifications": errors.count, "records-lost": check.lost, "stored-twice": check.twice,
        ])
    }

    /// A real read-only directory: permissions do not restrict root, so as root the writer
    /// runs as `nobody` (through `setpriv`); otherwise as the current user.
    @Test(.enabled(if: !Reliability.isRoot || Reliability.setpriv != nil, "as root, needs setpriv to drop privileges"))
    func aReadOnlyDirectoryRefusesTheCommitWhichIsRetriedOnceItIsWritable() async throws {
        let directory = try TemporaryDirectory("read-only")
        defer {
            chmod(directory.path, 0o755)
            directory.remove()
        }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let zone = ZoneID.public("EditRecord")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let earlier = (0..<2).map { EditRecord(id: "earlier-\($0)", owner: "root") }
        try await writer.commit(
            try earlier.map { .save($0.id, fields: try encoder.encode($0), baseVersion: 0, timestamp: HybridLogicalClock.shared.now()) },
            to: zone)
        let zoneDirectory = writer.directory(of: zone)
        let files = ["journal-0.ndjson", "lock"].map { zoneDirectory.appendingPathComponent($0).path }
        for file in files { #expect(chmod(file, 0o444) == 0) }
        #expect(chmod(zoneDirectory.path, 0o555) == 0)
        let before = try Reliability.picture(of: directory.url)

        let launcher = Reliability.isRoot
            ? [try #require(Reliability.setpriv), "--reuid=65534", "--regid=65534", "--clear-groups"] : []
        let worker = try WorkerProcess(
            ["mirror-retry", "--db", directory.path, "--id", "added"], launcher: launcher, input: true)
        defer { worker.kill() }  // no-op for a worker that already ended
        let lines = AsyncCollector(worker.lines)
        try await lines.wait(forCount: 2, "the worker loaded and tried to commit")
        #expect(lines.items[0] == "loaded 2")
        #expect(lines.items[1] == "refused permissionDenied attempts=1 pending=1 notifications=1",
                "refused, pending, posted once")
        #expect(try Reliability.picture(of: directory.url) == before, "nothing was written")

        // The directory becomes writable: the pending change goes through.
        #expect(chmod(zoneDirectory.path, 0o777) == 0)
        for file in files { #expect(chmod(file, 0o666) == 0) }
        try worker.send("go")
        try await lines.waitForEnd("the worker's output")
        #expect(try await worker.waitForExit() == 0)
        #expect(lines.items.last == "committed pending=0 notifications=1")

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = try await reader.fetchAll(in: zone).records
        #expect(Set(stored.map(\.id)) == Set(earlier.map(\.id) + ["added"]))
        #expect(stored.allSatisfy { $0.version == 1 })
        Reliability.report("read-only-directory", [
            "ran-as": Reliability.isRoot ? "nobody (setpriv)" : "the current user",
            "refused": 1, "notifications": 1, "committed-after-chmod": 1, "records-lost": 0,
        ])
    }
}
