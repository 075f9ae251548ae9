import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// The fields of a large snapshot's records are written to an unnamed file in the zone's
/// directory as the snapshot is read and mapped back (`FieldsSpill`, `MappedBytes`):
/// every record reads back whole, the pages are given back after decoding, nothing is left
/// in the directory, and a spill that cannot be written keeps the fields in memory.
#if os(Linux)
@Suite(.timeLimit(.minutes(5))) struct FieldsSpillTests {
    let zone = ZoneID.public("SampleRecord")

    /// A database in `directory` whose zone's snapshot is larger than
    /// `FieldsSpill.sizeSpilled`: 16,000 records, one near the end with a 1.5 MB
    /// title (larger than a spill buffer), compacted.
    ///
    /// - Parameter compacted: Whether the records are in the snapshot (else all in the
    ///   journal).
    static func seed(_ directory: TemporaryDirectory, compacted: Bool = true) async throws -> [SampleRecord] {
        try await seed(at: directory.url, compacted: compacted)
    }

    /// ``seed(_:compacted:)`` in the directory at `url`.
    static func seed(at url: URL, compacted: Bool = true) async throws -> [SampleRecord] {
        var options = JSONFileDatabase.Options()
        options.compactionThreshold = .max
        let database = try JSONFileDatabase(isolatedDirectory: url, options: options)
        let mirror = try await Mirror<SampleRecord>(database: database)
        var records = SampleRecord.many(16_000, titled: "A record with a title of some length, number")
        records[15_990].title = String(repeating: "long title ", count: 150_000)
        mirror.dataModel.append(contentsOf: records)
        try await mirror.flush()
        if compacted { try await database.compact(.public("SampleRecord")) }
        let file = compacted ? "snapshot.json" : "journal-0.ndjson"
        let size = try FileManager.default.attributesOfItem(
            atPath: url.appendingPathComponent("public/SampleRecord/" + file).path)[.size] as? Int
        #expect(try #require(size) >= FieldsSpill.sizeSpilled)
        return records
    }

    /// Whether every byte of `fields` lies in one of `ranges`.
    static func isMapped(_ fields: Data, in ranges: [(start: UInt, length: Int)]) -> Bool {
        fields.withUnsafeBytes { raw in
            let start = UInt(bitPattern: raw.baseAddress)
            return ranges.contains { start >= $0.start && start + UInt(raw.count) <= $0.start + UInt($0.length) }
        }
    }

    /// The resident size in kB of the mappings that start at `starts`, from
    /// `/proc/self/smaps`.
    static func residentKB(of starts: Set<UInt>) throws -> Int {
        // Read to its end with read(2): Foundation stops a file of size 0 (a /proc file)
        // after its first piece.
        let fd = open("/proc/self/smaps", O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: 1 << 16)
        while case let got = piece.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }), got > 0 {
            bytes += piece[0..<got]
        }
        let smaps = String(decoding: bytes, as: UTF8.self)
        var resident = 0
        var current = false
        for line in smaps.split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = parts.first, range.contains("-"), let dash = range.firstIndex(of: "-"),
               let start = UInt(range[..<dash], radix: 16) {
                current = starts.contains(start)
            } else if current, parts.first == "Rss:", parts.count >= 2, let kB = Int(parts[1]) {
                resident += kB
            }
        }
        return resident
    }

    @Test func aLargeSnapshotsFieldsAreSpilledAndEveryRecordReadsBackWhole() async throws {
        let directory = try TemporaryDirectory("spill")
        defer { directory.remove() }
        let records = try await Self.seed(directory)

        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let mirror = try await Mirror<SampleRecord>(database: database)
        #expect(Array(mirror.dataModel) == records, "every record, in order, with its 1.5 MB title")

        let stored = try await database.fetchAll(in: zone).records
        let ranges = MappedBytes.ranges
        #expect(stored.count == records.count)
        #expect(stored.allSatisfy { Self.isMapped($0.fields!, in: ranges) }, "every record's fields are mapped")
        let ours = Set(ranges.filter { range in
            stored.contains { Self.isMapped($0.fields!, in: [range]) }
        }.map(\.start))
        let mappedKB = ranges.filter { ours.contains($0.start) }.reduce(0) { $0 + $1.length } / 1024
        #expect(mappedKB >= 3 * 1024, "the fields of 16,000 records and a 1.5 MB one")
        // Decoding gave the pages back: a few may be mapped in again since.
        let resident = try Self.residentKB(of: ours)
        #expect(resident <= mappedKB / 4, "\(resident) kB of \(mappedKB) kB resident after opening")

        // Nothing named is left in the zone's directory.
        let names = try FileManager.default.contentsOfDirectory(
            atPath: directory.url.appendingPathComponent("public/SampleRecord").path)
        #expect(names.filter { !["snapshot.json", "lock"].contains($0) && !$0.hasPrefix("journal-") }.isEmpty, "\(names)")

        // Changes, a compaction that reads every spilled record, and a reopen.
        mirror.dataModel[3].title = "changed"
        mirror.dataModel.remove(at: 10)
        try await mirror.flush()
        try await database.compact(zone)
        var expected = records
        expected[3].title = "changed"
        expected.remove(at: 10)
        #expect(Array(mirror.dataModel) == expected)
        let reopened = try await Mirror<SampleRecord>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(Array(reopened.dataModel) == expected)
    }

    @Test func aLargeJournalsFieldsAreSpilledToo() async throws {
        let directory = try TemporaryDirectory("spill-journal")
        defer { directory.remove() }
        let records = try await Self.seed(directory, compacted: false)

        var options = JSONFileDatabase.Options()
        options.compactionThreshold = .max
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, options: options)
        let mirror = try await Mirror<SampleRecord>(database: database)
        #expect(Array(mirror.dataModel) == records)
        let stored = try await database.fetchAll(in: zone).records
        #expect(stored.allSatisfy { Self.isMapped($0.fields!, in: MappedBytes.ranges) }, "every record's fields are mapped")
        let names = try FileManager.default.contentsOfDirectory(
            atPath: directory.url.appendingPathComponent("public/SampleRecord").path)
        #expect(Set(names) == ["journal-0.ndjson", "lock"])
    }

    /// The start of the live mapping each record's fields lie in.
    static func mappings(of records: some Sequence<StoredRecord>) -> Set<UInt> {
        let ranges = MappedBytes.ranges
        return Set(records.compactMap { record in
            record.fields.flatMap { fields in ranges.first { Self.isMapped(fields, in: [$0]) }?.start }
        })
    }

    /// When another process compacts the zone, the database reads the new snapshot (a new
    /// spill) and a mirror pulls the whole zone again: it then holds the records read now,
    /// also those that did not change, so that the first spill's mappings (and the disk
    /// space of its file) go instead of staying as long as the mirror.
    @Test func aMirrorLetsTheFirstSpillGoWhenAnotherProcessCompacts() async throws {
        let directory = try TemporaryDirectory("spill-reload")
        defer { directory.remove() }
        _ = try await Self.seed(directory)
        var options = JSONFileDatabase.Options()
        options.compactionThreshold = .max
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, options: options)
        let mirror = try await Mirror<SampleRecord>(database: database)
        // Kept to the end, so that no later mapping takes the address of one of these.
        let firstRecords = try await database.fetchAll(in: zone).records
        let first = Self.mappings(of: firstRecords)
        #expect(!first.isEmpty)

        // Another process (an engine of its own) compacts a change, then changes a record in
        // the new generation: the mirror shows it only after it pulled the new generation.
        let other = try JSONFileDatabase(isolatedDirectory: directory.url, options: options)
        let otherMirror = try await Mirror<SampleRecord>(database: other)
        otherMirror.dataModel[3].title = "compacted elsewhere"
        try await otherMirror.flush()
        try await other.compact(zone)
        otherMirror.dataModel[4].title = "changed after"
        try await otherMirror.flush()
        try await mirror.waitUntil(timeout: .seconds(120)) { $0[4].title == "changed after" }

        let now = Self.mappings(of: try await database.fetchAll(in: zone).records)
        let held = Self.mappings(of: mirror.core.withLock { engine in engine.pull.storedRecords.map(\.value) })
        #expect(now.isDisjoint(with: first), "the database read the new snapshot")
        #expect(held.isSubset(of: now), "\(held.intersection(first).count) mappings of the first read still held")
        withExtendedLifetime(firstRecords) {}
    }

    /// Whether this process may mount a file system (`CAP_SYS_ADMIN` in effect), to show
    /// what a small, nearly full one does.
    static var canMount: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 21) != 0
    }

    /// Opening a large zone on a nearly full disk leaves the space to the zone's commits:
    /// a spill there would take what is left (as much as the fields), and keep it while the
    /// records are held, so that the next commit failed with `diskFull`.
    @Test(.enabled(if: canMount, "mounts a 16 MiB tmpfs"))
    func openingALargeZoneOnANearlyFullDiskLeavesItsSpaceToCommits() async throws {
        let directory = try TemporaryDirectory("spill-nearly-full")
        defer { directory.remove() }
        try #require(mount("tmpfs", directory.path, "tmpfs", 0, "size=16m") == 0)
        // Lazily: the last mappings go with the test's last records.
        defer { umount2(directory.path, Int32(MNT_DETACH)) }
        let url = directory.url.appendingPathComponent("database")
        let records = try await Self.seed(at: url)
        // 2 MiB left: room for commits, not for the fields.
        var stats = statvfs()
        try #require(statvfs(directory.path, &stats) == 0)
        let free = Int(stats.f_bavail) * Int(stats.f_frsize)
        try #require(free > 2 << 20)
        try #require(FileManager.default.createFile(
            atPath: directory.path + "/filler", contents: Data(count: free - (2 << 20))))

        let database = try JSONFileDatabase(isolatedDirectory: url)
        let mirror = try await Mirror<SampleRecord>(database: database)
        #expect(mirror.dataModel.count == records.count)
        mirror.dataModel[0].title = "on a nearly full disk"
        try await mirror.flush()
        let reopened = try await Mirror<SampleRecord>(database: try JSONFileDatabase(isolatedDirectory: url))
        #expect(reopened.dataModel.first?.title == "on a nearly full disk")
    }

    /// A spill is made only where the file system has room for it, for a compaction after
    /// it, and `FieldsSpill.spaceKeptFree` more.
    @Test func aSpillIsMadeOnlyWhereTheDiskHasRoomToSpare() throws {
        try withOpenTemporaryDirectory { _, fd in
            var stats = statvfs()
            try #require(fstatvfs(fd, &stats) == 0)
            let free = Int(stats.f_bavail) * Int(stats.f_frsize)
            try #require(free > FieldsSpill.roomNeeded(toSpill: 1 << 20), "the temporary directory's disk has room")

            #expect(FieldsSpill.Target(fileSystem: .live, directory: fd, spilling: 1 << 20) != nil)
            #expect(FieldsSpill.Target(fileSystem: .live, directory: fd, spilling: free / 2) == nil, "no room for a compaction")
            #expect(FieldsSpill.Target(fileSystem: .live, directory: fd, spilling: free) == nil, "no room for the spill")
        }
    }

    @Test func whenTheSpillCannotBeWrittenTheFieldsStayInMemory() async throws {
        let directory = try TemporaryDirectory("spill-full")
        defer { directory.remove() }
        let records = try await Self.seed(directory)

        let faulty = FaultyFileSystem()
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        let writesBefore = faulty.count(.write)
        // The first write of each part's spill: a snapshot this large is read in one part
        // per core, less those whose share starts inside the long title's line.
        let snapshot = try [UInt8](Data(contentsOf: directory.url.appendingPathComponent("public/SampleRecord/snapshot.json")))
        let parts = JSONFileFormat.partBounds(
            size: snapshot.count, from: JSONFileFormat.snapshotSizeReadInParts,
            read: JSONFileSnapshotReadingTests.reader(snapshot)
        ).count - 1
        faulty.failNext(.write, errno: ENOSPC, times: parts)
        let mirror = try await Mirror<SampleRecord>(database: database)
        #expect(faulty.count(.write) == writesBefore + parts, "each part tried to spill once, then stopped")
        #expect(Array(mirror.dataModel) == records)
        let stored = try await database.fetchAll(in: zone).records
        let ranges = MappedBytes.ranges
        #expect(stored.allSatisfy { !Self.isMapped($0.fields!, in: ranges) }, "the fields are in memory")

        mirror.dataModel[0].title = "after a full disk"
        try await mirror.flush()
        let reopened = try await Mirror<SampleRecord>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(reopened.dataModel.first?.title == "after a full disk")
        #expect(reopened.dataModel.count == records.count)
    }

    /// A snapshot read with a spill whose file cannot be opened (a file system without
    /// `O_TMPFILE`) or written gives what a read without one gives, in memory.
    @Test(arguments: [FileSystem.Operation.open, .write])
    func aSpillThatFailsGivesWhatAReadInMemoryGives(failing operation: FileSystem.Operation) throws {
        try withOpenTemporaryDirectory { directory, fd in
            let records = JSONFileSnapshotReadingTests.records(400)
            let faulty = FaultyFileSystem()
            faulty.failNext(operation, errno: operation == .open ? EOPNOTSUPP : EIO)

            let read = try Self.readSpilled(records, in: fd, through: faulty.fileSystem, pieceSize: 4096)
            #expect(faulty.count(operation) == 1)
            #expect(read == records)
            #expect(read.allSatisfy { !Self.isMapped($0.fields!, in: MappedBytes.ranges) })

            // Without the fault, the same read spills, and gives the same records.
            let spilled = try Self.readSpilled(records, in: fd, through: faulty.fileSystem, pieceSize: 4096)
            #expect(spilled == records)
            #expect(spilled.allSatisfy { Self.isMapped($0.fields!, in: MappedBytes.ranges) })
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        }
    }

    /// The spill is opened with `O_EXCL`, so not even its owner can give it a name through
    /// `/proc` (an unnamed file opened without it can be linked into the directory).
    @Test func theSpillCanNeverBeGivenAName() throws {
        try withOpenTemporaryDirectory { directory, fd in
            let spill = FieldsSpill(try #require(FieldsSpill.Target(fileSystem: .live, directory: fd, spilling: 4096)))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: MappedBytes.pageSize, alignment: 1)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "x"))
            let kept = try #require(spill.keep(buffer, count: 100))
            #expect(kept == Data(repeating: UInt8(ascii: "x"), count: 100))
            #expect(spill.descriptor >= 0)

            let linked = linkat(AT_FDCWD, "/proc/self/fd/\(spill.descriptor)", fd, "named", AT_SYMLINK_FOLLOW)
            #expect(linked == -1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        }
    }

    /// `records` written as a snapshot and read back, in pieces of `pieceSize` bytes, with a
    /// spill in the directory `fd` made through `fileSystem`.
    static func readSpilled(
        _ records: [StoredRecord], in fd: Int32, through fileSystem: FileSystem = .live,
        pieceSize: Int = JSONFileFormat.snapshotPieceSize
    ) throws -> [StoredRecord] {
        let bytes = JSONFileSnapshotReadingTests.snapshot(records)
        return try JSONFileFormat.readSnapshot(
            size: bytes.count, pieceSize: pieceSize,
            spill: FieldsSpill.Target(fileSystem: fileSystem, directory: fd, spilling: bytes.count),
            read: JSONFileSnapshotReadingTests.reader(bytes)
        ).records
    }

    @Test func aMappingGoesWithTheLastRecordThatUsesIt() throws {
        try withOpenTemporaryDirectory { _, fd in
            let records = JSONFileSnapshotReadingTests.records(300)
            var read: [StoredRecord]? = try Self.readSpilled(records, in: fd)
            let start = try #require(read?.first?.fields).withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
            let mapping = try #require(MappedBytes.ranges.first { start >= $0.start && start < $0.start + UInt($0.length) })
            let kept = read?[299]
            read = nil
            #expect(MappedBytes.ranges.contains { $0 == mapping }, "a record still uses it")
            #expect(kept == records[299])
            _ = consume kept
            #expect(!MappedBytes.ranges.contains { $0 == mapping }, "unmapped with the last record")
        }
    }

    /// A record's fields are a `Data` like any other, which its holder may change in place:
    /// once no other record shares their mapping, `Data` changes the mapped bytes where they
    /// lie (it copies only shared bytes), which must not fault, and its pages given back
    /// keep the change.
    @Test func fieldsChangedInPlaceOnceTheirMappingIsTheirsAlone() throws {
        try withOpenTemporaryDirectory { _, fd in
            let records = JSONFileSnapshotReadingTests.records(300)
            var read: [StoredRecord]? = try Self.readSpilled(records, in: fd)
            var fields = try #require(read?[299].fields)
            #expect(Self.isMapped(fields, in: MappedBytes.ranges))
            read = nil

            fields[fields.startIndex + 1] = UInt8(ascii: "N")
            fields.withUnsafeMutableBytes { $0[$0.count - 2] = UInt8(ascii: "Z") }
            MappedBytes.releaseResidentPages()
            var expected = try #require(records[299].fields)
            expected[expected.startIndex + 1] = UInt8(ascii: "N")
            expected[expected.endIndex - 2] = UInt8(ascii: "Z")
            #expect(fields == expected)
        }
    }
}
#endif
