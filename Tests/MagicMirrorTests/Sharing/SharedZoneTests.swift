import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// The shared zone as a `RecordDatabase` serves it, below `Mirror`: its tokens only grow,
/// its change sets, and grants that are not valid (written behind the library's back).
@Suite(.timeLimit(.minutes(5))) struct SharedZoneTests {
    static let bobsZone = ZoneID.shared("Todo", user: "bob")
    static let alicesZone = ZoneID.private("Todo", user: "alice")

    static func save(_ id: String, _ title: String, base: Int) -> RecordOperation {
        .save(id, fields: Data(#"{"id":"\#(id)","title":"\#(title)"}"#.utf8), baseVersion: base,
              timestamp: HybridLogicalClock.shared.now())
    }

    static func grantStore(_ database: any RecordDatabase) throws -> any GrantStore {
        try #require(database as? any GrantStore)
    }

    @Test(arguments: DatabaseFactory.all)
    func tokensGrowWithEveryChangeAndChangeSetsAreComplete(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = try Self.grantStore(opened.database)
        try await database.commit([Self.save("t1", "one", base: 0), Self.save("t2", "two", base: 0)], to: Self.alicesZone)
        var tokens = [try await database.currentToken(in: Self.bobsZone)]

        try await database.share(["t1"], in: Self.alicesZone, with: SharingTests.bob, access: .readWrite)
        tokens.append(try await database.currentToken(in: Self.bobsZone))
        try await database.commit([Self.save("t2", "two, edited", base: 1)], to: Self.alicesZone)
        tokens.append(try await database.currentToken(in: Self.bobsZone))
        let outcome = try await database.commit([Self.save("t1", "one, by bob", base: 1)], to: Self.bobsZone)
        #expect(outcome.isApplied)
        tokens.append(outcome.token)
        #expect(try await database.currentToken(in: Self.bobsZone) == outcome.token)
        try await database.revokeShares(of: ["t1"], in: Self.alicesZone, from: SharingTests.bob)
        tokens.append(try await database.currentToken(in: Self.bobsZone))
        for (earlier, later) in zip(tokens, tokens.dropFirst()) { #expect(earlier < later, "\(tokens)") }

        let all = try await database.changes(in: Self.bobsZone, since: tokens[1])
        #expect(all.isComplete)
        #expect(all.records.isEmpty)
        let none = try await database.changes(in: Self.bobsZone, since: tokens.last!)
        #expect(!none.isComplete)
        #expect(none.records.isEmpty)
        #expect(none.token == tokens.last!)

        // Sharing again after a revocation (the grant's tombstone is its base).
        try await database.share(["t1"], in: Self.alicesZone, with: SharingTests.bob, access: .readOnly)
        let again = try await database.fetchAll(in: Self.bobsZone)
        #expect(again.records.map(\.id) == ["t1"])
        #expect(again.records.first?.version == 2)
        #expect(again.token > tokens.last!)
        #expect(try await database.fetch(["t1", "t2"], in: Self.bobsZone).map(\.id) == ["t1"])
    }

    @Test(arguments: DatabaseFactory.all)
    func invalidGrantsShowNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = try Self.grantStore(opened.database)
        let stored = try await database.commit([Self.save("t1", "alice's", base: 0)], to: Self.alicesZone)
        guard case .applied(let record) = stored.results.first else { Issue.record("not stored"); return }
        let hostile = [
            // An owner name that is a path, one that is not a name, fields that are no grant,
            // and a grant of another incarnation of a real record.
            #"{"access":"readWrite","created":"\#(record.created)","owner":".."}"#,
            #"{"access":"readWrite","created":"\#(record.created)","owner":"a/b"}"#,
            #"{"owner":"alice"}"#,
            #"{"access":"readWrite","created":"1-0","owner":"alice"}"#,
        ]
        var operations: [RecordOperation] = []
        for (index, fields) in hostile.enumerated() {
            operations.append(.save(
                index == 3 ? "t1" : "h\(index)", fields: Data(fields.utf8), baseVersion: 0,
                timestamp: HybridLogicalClock.shared.now()))
        }
        #expect(try await database.commitGrants(operations, to: Self.bobsZone).isApplied)
        #expect(try await database.fetchAll(in: Self.bobsZone).records.isEmpty)
        #expect(try await database.shares(in: Self.bobsZone).isEmpty)
        let mirror = try await SharingTests.sharedMirror(SharingTests.bob, database)
        #expect(mirror.dataModel.isEmpty)
        // The edit of a record whose grant is invalid is refused like any other.
        let error = await #expect(throws: MirrorError.self) {
            try await database.commit([Self.save("t1", "bob's", base: 1)], to: Self.bobsZone)
        }
        #expect(error?.kind == .refused)
    }

    @Test func theJSONFileDatabaseKeepsGrantsInTheRecipientsSharedDirectory() async throws {
        let directory = try TemporaryDirectory("shared-files")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await database.commit([Self.save("t1", "secret title", base: 0)], to: Self.alicesZone)
        try await database.share(["t1"], in: Self.alicesZone, with: SharingTests.bob, access: .readWrite)
        let grants = directory.url.appendingPathComponent("shared/bob/Todo/journal-0.ndjson")
        let line = try String(contentsOf: grants, encoding: .utf8)
        #expect(line.contains(#""owner":"alice""#), "\(line)")
        #expect(line.contains(#""access":"readWrite""#), "\(line)")
        #expect(!line.contains("secret title"), "a grant holds no field of the record")
        #expect(try await database.sharedZones(of: "Todo") == [Self.bobsZone])
        // Private directories keep their modes; nothing of alice's is under bob's.
        let mode = try FileManager.default.attributesOfItem(
            atPath: directory.url.appendingPathComponent("private/alice").path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }

    @Test func aRecipientsDirectoryThatLinksOutsideTheRootIsRefused() async throws {
        let parent = try TemporaryDirectory("shared-link")
        defer { parent.remove() }
        let outside = parent.url.appendingPathComponent("outside")
        let root = parent.url.appendingPathComponent("db")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("shared"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("shared/bob"), withDestinationURL: outside)
        let database = try JSONFileDatabase(isolatedDirectory: root)
        try await database.commit([Self.save("t1", "alice's", base: 0)], to: Self.alicesZone)

        let error = await #expect(throws: MirrorError.self) {
            try await database.share(["t1"], in: Self.alicesZone, with: SharingTests.bob, access: .readOnly)
        }
        #expect(error?.kind == .permissionDenied)
        await #expect(throws: MirrorError.self) { _ = try await SharingTests.sharedMirror(SharingTests.bob, database) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "nothing written outside")
    }
}
