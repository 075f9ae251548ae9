import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// The private scope through `Mirror`: its directories are 0700 and its files 0600 after
/// creation and after compaction, whatever the umask. (The database-level checks are in
/// `JSONFileSafetyTests`.)
@Suite(.timeLimit(.minutes(10))) struct ReliabilityPrivateScopeTests {
    /// The permission bits of every file and directory below `url`, by relative path.
    private func modes(below url: URL) throws -> [String: Int] {
        var modes: [String: Int] = [:]
        for path in try FileManager.default.subpathsOfDirectory(atPath: url.path) {
            modes[path] = try JSONFileTestSupport.mode(url.appendingPathComponent(path))
        }
        return modes
    }

    /// `private/` lets others pass but not list; everything below a user is 0700 / 0600.
    ///
    /// - Returns: How many files were checked, and how many were not 0600.
    private func expectPrivate(_ root: URL, user: String, recordType: String) throws -> (files: Int, open: Int) {
        let privateDirectory = root.appendingPathComponent("private")
        #expect(try JSONFileTestSupport.mode(privateDirectory) & 0o066 == 0, "others may not list the users")
        let userDirectory = privateDirectory.appendingPathComponent(user)
        #expect(try JSONFileTestSupport.mode(userDirectory) == 0o700)
        let below = try modes(below: userDirectory)
        #expect(below[recordType] == 0o700)
        var files = 0
        var open = 0
        for (path, mode) in below where path != recordType {
            #expect(mode == 0o600, "\(path) is \(String(mode, radix: 8))")
            files += 1
            if mode != 0o600 { open += 1 }
        }
        return (files, open)
    }

    @Test func aPrivateMirrorsFilesStay0600Through0700DirectoriesAndCompactions() async throws {
        let directory = try TemporaryDirectory("private-mirror")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url, options: .init(compactionThreshold: 512))
        let zone = ZoneID.private("Chore", user: "alice")
        let mirror = try await Mirror<Chore>(database: database, scope: .private, user: try MirrorUser(name: "alice"))
        mirror.dataModel.append(Chore(title: "first"))
        try await flush(mirror)
        let zoneDirectory = database.directory(of: zone)
        #expect(JSONFileTestSupport.names(in: zoneDirectory) == ["journal-0.ndjson", "lock"])
        let created = try expectPrivate(directory.url, user: "alice", recordType: "Chore")

        for number in 0..<20 {
            mirror.dataModel.append(Chore(title: "chore \(number)", notes: String(repeating: "n", count: 100)))
            try await flush(mirror)
        }
        try await database.waitForBackgroundWork(in: zone)
        #expect(try await database.currentToken(in: zone).generation > 0, "compacted")
        #expect(JSONFileTestSupport.names(in: zoneDirectory).contains("snapshot.json"))
        let compacted = try expectPrivate(directory.url, user: "alice", recordType: "Chore")

        // A public mirror beside it follows the umask: the check above can tell them apart.
        let publicMirror = try await Mirror<Chore>(database: database)
        publicMirror.dataModel.append(Chore(title: "public"))
        try await flush(publicMirror)
        let publicJournal = database.directory(of: .public("Chore")).appendingPathComponent("journal-0.ndjson")
        #expect(try JSONFileTestSupport.mode(publicJournal) & 0o044 != 0, "public files are readable by others")
        Reliability.report("private-scope-mirror", [
            "files-checked": created.files + compacted.files, "not-private": created.open + compacted.open,
        ])
    }

    /// The same from another process whose umask is 000, writing and compacting all along.
    @Test func aPrivateZoneIsPrivateEvenWithAnOpenUmask() async throws {
        let directory = try TemporaryDirectory("private-umask")
        defer { directory.remove() }
        let worker = try WorkerProcess(
            ["mirror-writer", "--db", directory.path, "--prefix", "u-", "--user", "bob", "--count", "60",
             "--compaction-threshold", "2048", "--compact-every", "5"],
            launcher: ["/bin/sh", "-c", "umask 000 && exec \"$0\" \"$@\""])
        var acknowledged: [String] = []
        for await line in worker.lines where !line.hasPrefix("ready ") { acknowledged.append(line) }
        #expect(try await worker.waitForExit() == 0)
        #expect(acknowledged.count == 60)

        let checked = try expectPrivate(directory.url, user: "bob", recordType: "CrashRecord")
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let zone = ZoneID.private("CrashRecord", user: "bob")
        #expect(try await database.currentToken(in: zone).generation > 0, "compacted")
        #expect(Set(try await database.fetchAll(in: zone).records.map(\.id)) == Set(acknowledged))
        // The same process's public files, for contrast, are open to all under umask 000.
        #expect(try JSONFileTestSupport.mode(directory.url.appendingPathComponent("database.json")) == 0o666)
        Reliability.report("private-scope-umask-000", ["files-checked": checked.files, "not-private": checked.open])
    }
}
