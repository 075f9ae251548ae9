import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A database that connects as one user (``RecordDatabase/connectedUser``, as PostgreSQL's
/// role): private and shared mirrors opened without a `user:` are that user's, and do not
/// follow a session's switches.
@Suite(.timeLimit(.minutes(5)))
struct ConnectedUserTests {
    @Test func aPrivateMirrorWithoutAUserIsTheConnectedUsers() async throws {
        let base = InMemoryDatabase()
        let alice = try MirrorUser(name: "alice")
        let database = ScriptedDatabase(base, connectedUser: alice)
        let session = UserSession(user: try MirrorUser(name: "bob"))
        let mirror = try await Mirror<SampleRecord>(
            database: database, scope: .private, configuration: MirrorConfiguration(userSession: session))
        mirror.dataModel.append(SampleRecord(title: "mine"))
        try await mirror.flush()
        #expect(try await base.fetchAll(in: .private(SampleRecord.recordType, user: alice)).records.count == 1)
        #expect(try await base.fetchAll(in: .private(SampleRecord.recordType, user: session.user)).records.isEmpty)

        // The session's switch does not move it: the database decides.
        _ = session.switchUser(to: try MirrorUser(name: "carol"))
        mirror.dataModel.append(SampleRecord(title: "still mine"))
        try await mirror.flush()
        #expect(try await base.fetchAll(in: .private(SampleRecord.recordType, user: alice)).records.count == 2)
        #expect(mirror.dataModel.count == 2)
    }

    @Test func aUserGivenByTheAppWinsAndADatabaseWithoutOneFollowsTheSession() async throws {
        let base = InMemoryDatabase()
        let database = ScriptedDatabase(base, connectedUser: try MirrorUser(name: "alice"))
        let named = try await Mirror<SampleRecord>(database: database, scope: .private, user: try MirrorUser(name: "dave"))
        named.dataModel.append(SampleRecord(title: "dave's"))
        try await named.flush()
        #expect(try await base.fetchAll(in: .private(SampleRecord.recordType, user: "dave")).records.count == 1)

        #expect(base.connectedUser == nil)
        let session = UserSession(user: try MirrorUser(name: "erin"))
        let following = try await Mirror<SampleRecord>(
            database: base, scope: .private, configuration: MirrorConfiguration(userSession: session))
        following.dataModel.append(SampleRecord(title: "erin's"))
        try await following.flush()
        #expect(try await base.fetchAll(in: .private(SampleRecord.recordType, user: "erin")).records.count == 1)
    }

    @Test func aReplicaConnectsAsItsRemote() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("magicmirror-connected-user-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let remote = ScriptedDatabase(InMemoryDatabase(), connectedUser: try MirrorUser(name: "alice"))
        let replicated = ReplicatedDatabase(local: try JSONFileDatabase(directory: directory), remote: remote)
        #expect(replicated.connectedUser?.name == "alice")
        let plain = ReplicatedDatabase(
            local: try JSONFileDatabase(directory: directory.appendingPathComponent("plain")), remote: InMemoryDatabase())
        #expect(plain.connectedUser == nil)
    }
}
