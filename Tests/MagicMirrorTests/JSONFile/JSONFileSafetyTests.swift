import Foundation
import MagicMirror
import Testing

/// Names never become paths outside the root, symbolic links are not followed, and the
/// private scope is 0700 / 0600.
@Suite(.timeLimit(.minutes(5))) struct JSONFileSafetyTests {
    static let badNames = [
        "", ".", "..", "../escape", "../../escape", "a/b", "/etc", "/tmp/escape", "nul\0byte",
        String(repeating: "x", count: 256),
    ]

    @Test func invalidNamesNeverBecomePaths() async throws {
        let parent = try TemporaryDirectory("names")
        defer { parent.remove() }
        let root = parent.url.appendingPathComponent("db")
        let db = try JSONFileDatabase(isolatedDirectory: root)
        for bad in Self.badNames {
            for (zone, role) in [(ZoneID.public(bad), "record type"), (.private("Todo", user: bad), "user name"),
                                 (.private(bad, user: "alice"), "record type")] {
                do {
                    try await db.commit([jsonSave("r1", ["v": 1])], to: zone)
                    Issue.record("\(role) \(bad.debugDescription) was accepted")
                } catch let error as MirrorError {
                    #expect(error.kind == .invalidName)
                    #expect(error.message.contains(role))
                }
                await #expect(throws: MirrorError.self) { try await db.fetchAll(in: zone) }
                #expect(throws: MirrorError.self) { try db.subscribe(to: zone) { _ in } }
            }
            do {
                try await db.commit([jsonSave(bad, ["v": 1])], to: .public("Todo"))
                Issue.record("record id \(bad.debugDescription) was accepted")
            } catch let error as MirrorError {
                #expect(error.kind == .invalidName)
                #expect(error.message.contains("record id"))
            }
        }
        #expect(JSONFileTestSupport.names(in: parent.url) == ["db"], "nothing was created next to the root")
        let created = try FileManager.default.subpathsOfDirectory(atPath: root.path).sorted()
        #expect(created == ["database.json"], "names are checked before anything is created")
    }

    /// Paths below the root that a symbolic link may replace, and the zone that goes through
    /// each.
    static let linkedPaths: [(String, ZoneID)] = [
        ("public", .public("Todo")),
        ("public/Todo", .public("Todo")),
        ("private", .private("Todo", user: "alice")),
        ("private/alice", .private("Todo", user: "alice")),
        ("private/alice/Todo", .private("Todo", user: "alice")),
    ]

    @Test(arguments: linkedPaths)
    func aSymbolicLinkBelowTheRootIsNotFollowed(linked: String, zone: ZoneID) async throws {
        let parent = try TemporaryDirectory("symlink")
        defer { parent.remove() }
        let root = parent.url.appendingPathComponent("db")
        let outside = parent.url.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let link = root.appendingPathComponent(linked)
        try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)
        let db = try JSONFileDatabase(isolatedDirectory: root)

        do {
            try await db.commit([jsonSave("r1", ["v": 1])], to: zone)
            Issue.record("a zone through the link \(linked) was written")
        } catch let error as MirrorError {
            #expect(error.message.contains("symbolic link"))
            #expect(error.file?.hasSuffix(linked) == true)
        }
        await #expect(throws: MirrorError.self) { try await db.fetchAll(in: zone) }
        #expect(throws: MirrorError.self) { try db.subscribe(to: zone) { _ in } }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: outside.path).isEmpty, "nothing written outside")
    }

    @Test func aJournalThatIsASymbolicLinkIsNotFollowed() async throws {
        let parent = try TemporaryDirectory("symlink-file")
        defer { parent.remove() }
        let root = parent.url.appendingPathComponent("db")
        let writer = try JSONFileDatabase(isolatedDirectory: root)
        try await writer.commit([jsonSave("r1", ["v": 1])], to: .public("Todo"))
        let journal = writer.directory(of: .public("Todo")).appendingPathComponent("journal-0.ndjson")
        let outside = parent.url.appendingPathComponent("outside.ndjson")
        try FileManager.default.moveItem(at: journal, to: outside)
        try FileManager.default.createSymbolicLink(at: journal, withDestinationURL: outside)
        let before = try Data(contentsOf: outside)

        let reader = try JSONFileDatabase(isolatedDirectory: root)
        do {
            _ = try await reader.fetchAll(in: .public("Todo"))
            Issue.record("a journal that is a link was read")
        } catch let error as MirrorError {
            #expect(error.message.contains("symbolic link"))
        }
        await #expect(throws: MirrorError.self) { try await reader.commit([jsonSave("r2", ["v": 1])], to: .public("Todo")) }
        #expect(try Data(contentsOf: outside) == before)
    }

    @Test func privateZonesAre0700And0600BeforeAndAfterCompaction() async throws {
        let directory = try TemporaryDirectory("private")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let zone = ZoneID.private("Todo", user: "alice")
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let user = directory.url.appendingPathComponent("private/alice")
        let zoneDirectory = db.directory(of: zone)
        #expect(try JSONFileTestSupport.mode(user) == 0o700)
        #expect(try JSONFileTestSupport.mode(zoneDirectory) == 0o700)
        for name in ["journal-0.ndjson", "lock"] {
            #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent(name)) == 0o600, "\(name)")
        }
        #expect(try JSONFileTestSupport.mode(directory.url.appendingPathComponent("private")) & 0o077 & ~0o011 == 0,
                "others may not list the users")

        try await db.compact(zone)
        try await db.commit([jsonSave("b", ["v": 1])], to: zone)
        try await db.compact(zone)
        for name in ["snapshot.json", "journal-2.ndjson", "lock"] {
            #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent(name)) == 0o600, "\(name)")
        }

        // Quarantine files are private too.
        try JSONFileTestSupport.append(Array("torn".utf8), to: zoneDirectory.appendingPathComponent("journal-2.ndjson"))
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        _ = try await reopened.fetchAll(in: zone)
        let quarantine = try #require(JSONFileTestSupport.names(in: zoneDirectory).first { $0.hasPrefix("quarantine-") })
        #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent(quarantine)) == 0o600)
    }

    @Test func aPrivateDirectoryThatIsTooOpenIsTightened() async throws {
        let directory = try TemporaryDirectory("private-open")
        defer { directory.remove() }
        let user = directory.url.appendingPathComponent("private/bob")
        try FileManager.default.createDirectory(
            at: user, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("a", ["v": 1])], to: .private("Notes", user: "bob"))
        #expect(try JSONFileTestSupport.mode(user) == 0o700)
    }

    @Test func compactionKeepsTheFilesModes() async throws {
        let directory = try TemporaryDirectory("modes")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        let zone = ZoneID.public("Todo")
        try await db.commit([jsonSave("a", ["v": 1])], to: zone)
        let zoneDirectory = db.directory(of: zone)
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o640], ofItemAtPath: zoneDirectory.appendingPathComponent("journal-0.ndjson").path)
        try await db.compact(zone)
        #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent("snapshot.json")) == 0o640)
        #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent("journal-1.ndjson")) == 0o640)
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o604], ofItemAtPath: zoneDirectory.appendingPathComponent("snapshot.json").path)
        try await db.compact(zone)
        #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent("snapshot.json")) == 0o604)
        #expect(try JSONFileTestSupport.mode(zoneDirectory.appendingPathComponent("journal-2.ndjson")) == 0o640)
    }
}
