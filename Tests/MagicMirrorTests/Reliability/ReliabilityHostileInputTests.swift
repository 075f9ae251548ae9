import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A record whose record type a test chooses (through a task-local value), to hand hostile
/// record types to `Mirror`.
private struct HostileRecord: Recordable {
    @TaskLocal static var name = "HostileRecord"
    static var recordType: String { name }
    var id: String
    var text = ""
}

/// Hostile names and sizes: path traversal and other bad names as record types, user names
/// and record ids, through `Mirror` and through the database; a zone directory that is a
/// symbolic link out of the root; a 10 MB record; 100,000 records in one commit. Nothing is
/// written outside the root, and each refusal is a clear `MirrorError`.
///
/// The database-level name and link cases are also in `JSONFileSafetyTests`.
@Suite(.timeLimit(.minutes(10))) struct ReliabilityHostileInputTests {
    /// The names of the issue: traversal, absolute paths, separators, empty, `.`, NUL, and
    /// 300 bytes.
    static let hostileNames = [
        "../x", "..", "/etc", "a/b", "", ".", "nul\0byte", String(repeating: "n", count: 300),
        String(repeating: "é", count: 150),
    ]

    /// A database in `<parent>/db` next to an empty sentinel directory `<parent>/outside`.
    private func rootWithSentinel(_ label: String) throws -> (parent: TemporaryDirectory, root: URL, outside: URL) {
        let parent = try TemporaryDirectory(label)
        let outside = parent.url.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        return (parent, parent.url.appendingPathComponent("db"), outside)
    }

    /// Nothing was written outside the root: the sentinel is empty, the parent holds only the
    /// root and the sentinel, and nothing named like a database file appeared in `/etc`.
    private func expectNothingOutside(_ parent: TemporaryDirectory, _ outside: URL) throws {
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "the sentinel stays empty")
        #expect(JSONFileTestSupport.names(in: parent.url) == ["db", "outside"])
        for name in ["journal-0.ndjson", "lock", "snapshot.json"] {
            #expect(!FileManager.default.fileExists(atPath: "/etc/\(name)"))
        }
    }

    private func expectInvalidName(_ error: any Error, role: String, _ name: String) {
        guard let error = error as? MirrorError else {
            Issue.record("not a MirrorError: \(error)")
            return
        }
        #expect(error.kind == .invalidName, "\(role) \(name.debugDescription)")
        #expect(error.message.contains("invalid \(role)"), "a clear message: \(error.message)")
    }

    @Test func hostileNamesAreRefusedThroughMirrorAndDatabaseAndNothingIsWrittenOutside() async throws {
        let (parent, root, outside) = try rootWithSentinel("hostile-names")
        defer { parent.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: root)
        var refusals = 0

        for name in Self.hostileNames {
            // Record types.
            do {
                _ = try await HostileRecord.$name.withValue(name) { try await Mirror<HostileRecord>(database: database) }
                Issue.record("Mirror accepted the record type \(name.debugDescription)")
            } catch {
                expectInvalidName(error, role: "record type", name)
                refusals += 1
            }
            do {
                try await database.commit([jsonSave("r", ["v": 1])], to: .public(name))
                Issue.record("the database accepted the record type \(name.debugDescription)")
            } catch {
                expectInvalidName(error, role: "record type", name)
                refusals += 1
            }
            // User names.
            do {
                _ = try await Mirror<Chore>(database: database, scope: .private, user: try MirrorUser(name: name))
                Issue.record("Mirror accepted the user name \(name.debugDescription)")
            } catch {
                expectInvalidName(error, role: "user name", name)
                refusals += 1
            }
            do {
                _ = try await database.fetchAll(in: .private("Chore", user: name))
                Issue.record("the database accepted the user name \(name.debugDescription)")
            } catch {
                expectInvalidName(error, role: "user name", name)
                refusals += 1
            }
            // Record ids, through the database.
            do {
                try await database.commit([jsonSave(name, ["v": 1])], to: .public("HostileRecord"))
                Issue.record("the database accepted the record id \(name.debugDescription)")
            } catch {
                expectInvalidName(error, role: "record id", name)
                refusals += 1
            }
        }

        // Record ids, through a mirror: the good records of the batch are committed, each bad
        // one is held and reported once.
        let mirror = try await Mirror<HostileRecord>(database: database)
        let errors = ErrorNotificationCollector(naming: Self.hostileNames)
        let changes = AsyncCollector(mirror.changes())
        let good = (0..<3).map { HostileRecord(id: "good-\($0)") }
        mirror.dataModel.append(contentsOf: good)
        mirror.dataModel.append(contentsOf: Self.hostileNames.map { HostileRecord(id: $0) })
        try await errors.errors.wait(forCount: Self.hostileNames.count, "one error per bad id")
        try await changes.wait("the good records committed") { changes in
            Set(changes.filter { $0.state == .committed }.map(\.recordID)) == Set(good.map(\.id))
        }
        #expect(Set(errors.errors.items.flatMap(\.recordIDs)) == Set(Self.hostileNames))
        for error in errors.errors.items {
            expectInvalidName(error, role: "record id", error.recordIDs.first ?? "?")
        }
        let held = mirror.pendingChanges
        #expect(Set(held.map(\.recordID)) == Set(Self.hostileNames), "the bad ids stay pending, visible")
        #expect(held.allSatisfy { $0.isOnHold && $0.lastError?.kind == .invalidName }, "on hold: retrying cannot fix them")
        let stored = try await JSONFileDatabase(isolatedDirectory: root).fetchAll(in: .public("HostileRecord"))
        #expect(stored.records.map(\.id).sorted() == good.map(\.id), "the good records of the batch are stored")
        #expect(errors.count == Self.hostileNames.count, "each posted once, and not retried by itself")
        refusals += errors.count

        // flush() tries changes on hold again: each fails again the same way, which the flush
        // throws; the failures were posted already and are not posted again.
        do {
            try await flush(mirror)
            Issue.record("flush() returned although the ids are invalid")
        } catch {
            expectInvalidName(error, role: "record id", (error as? MirrorError)?.recordIDs.first ?? "?")
        }
        try await mirror.waitUntilPendingChanges(timeout: .seconds(120), "every bad id tried again and held") { pending in
            Set(pending.map(\.recordID)) == Set(Self.hostileNames)
                && pending.allSatisfy { $0.failedAttempts >= 2 && $0.isOnHold }
        }

        try expectNothingOutside(parent, outside)
        let created = try FileManager.default.subpathsOfDirectory(atPath: root.path).sorted()
        #expect(created == ["database.json", "public", "public/HostileRecord", "public/HostileRecord/journal-0.ndjson",
                            "public/HostileRecord/lock"])
        #expect(errors.count == Self.hostileNames.count, "one notification per failure, not per attempt")
        Reliability.report("hostile-names", [
            "names": Self.hostileNames.count, "refusals": refusals,
            "written-outside": try FileManager.default.subpathsOfDirectory(atPath: outside.path).count,
        ])
    }

    /// A zone directory (or a private user's directory) that is a symbolic link to outside the
    /// root: a mirror refuses to open it and writes nothing there.
    @Test(arguments: [("public/Chore", Scope.public), ("private/alice", .private), ("private/alice/Chore", .private)])
    func aZoneDirectoryThatLinksOutsideTheRootIsRefused(linked: String, scope: Scope) async throws {
        let (parent, root, outside) = try rootWithSentinel("hostile-link")
        defer { parent.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: root)
        let link = root.appendingPathComponent(linked)
        try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)

        do {
            let mirror = try await Mirror<Chore>(database: database, scope: scope, user: scope == .private ? try MirrorUser(name: "alice") : nil)
            mirror.dataModel.append(Chore(title: "escaped"))
            try await flush(mirror)
            Issue.record("a mirror opened a zone through the link \(linked)")
        } catch let error as MirrorError {
            #expect(error.kind == .permissionDenied)
            #expect(error.message.contains("symbolic link"), "a clear message: \(error.message)")
            #expect(error.file == link.path)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "nothing written outside")
    }

    @Test func aTenMegabyteRecordRoundTrips() async throws {
        let directory = try TemporaryDirectory("hostile-large")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let mirror = try await Mirror<Chore>(database: database)
        // 10 MB of text that JSON must escape now and then: quotes, backslashes, line feeds,
        // and characters of several UTF-8 lengths.
        let unit = "0123456789abcdef\"\\\n é€😀 "
        let large = Chore(id: "large", title: "large", notes: String(repeating: unit, count: 10_000_000 / unit.utf8.count))
        #expect(large.notes.utf8.count >= 9_990_000)
        mirror.dataModel.append(large)
        mirror.dataModel.append(Chore(id: "small", title: "small"))
        try await flush(mirror)

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let loaded = try await Mirror<Chore>(database: reader)
        #expect(loaded.dataModel.first { $0.id == "large" } == large, "read back whole by another process")
        try await reader.compact(.public("Chore"))
        let afterCompaction = try await Mirror<Chore>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
        #expect(afterCompaction.dataModel.first { $0.id == "large" } == large, "and from the snapshot")
        #expect(afterCompaction.dataModel.count == 2)
        Reliability.report("hostile-large-record", ["bytes": large.notes.utf8.count, "round-trips": 2, "lost": 0])
    }

    /// One commit of 100,000 records, from a mirror; another process loads them all. (This
    /// run found opening such a commit quadratic: 98 s, now 0.5 s.)
    @Test func aHundredThousandRecordsInOneCommit() async throws {
        let directory = try TemporaryDirectory("hostile-many")
        defer { directory.remove() }
        let count = 100_000
        let zone = ZoneID.public("Chore")
        // No automatic compaction, so that the journal can be looked at as written.
        let options = JSONFileDatabase.Options(compactionThreshold: .max)
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, options: options)
        let mirror = try await Mirror<Chore>(
            database: database, configuration: MirrorConfiguration(maximumBatchSize: count))
        let chores = (0..<count).map { Chore(id: String(format: "many-%06d", $0), title: "chore \($0)", rank: $0) }
        mirror.dataModel.append(contentsOf: chores)
        try await flush(mirror, within: .seconds(120))

        let reader = try JSONFileDatabase(isolatedDirectory: directory.url, options: options)
        let all = try await reader.fetchAll(in: zone)
        #expect(all.records.count == count)
        #expect(all.token.sequence == 1, "one commit")
        let journal = try Data(contentsOf: reader.directory(of: zone).appendingPathComponent("journal-0.ndjson"))
        #expect(journal.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 } == count, "one line per record")
        #expect(journal.ranges(of: Data(#""end":true"#.utf8)).count == 1, "one append, applied whole or not at all")
        let loaded = try await Mirror<Chore>(database: reader)
        #expect(loaded.dataModel.count == count)
        #expect(loaded.dataModel.array == chores, "another process loads them all, in id order")
        Reliability.report("hostile-many-records", [
            "records": count, "commits": all.token.sequence, "lost": count - all.records.count,
        ])
    }
}
