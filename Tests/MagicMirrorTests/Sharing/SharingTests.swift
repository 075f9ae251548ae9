import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// Sharing private records with other users through `Mirror`, in one process, on every
/// database: a share, a recipient's edit, a revocation while the recipient's mirror is
/// open, a third user who sees nothing, and every refusal. SharingProcessTests runs the
/// same story in real processes.
@Suite(.timeLimit(.minutes(5))) struct SharingTests {
    struct Todo: Recordable, Hashable {
        var id: String
        var title: String
    }

    static let alice = try! MirrorUser(name: "alice")
    static let bob = try! MirrorUser(name: "bob")
    static let carol = try! MirrorUser(name: "carol")
    static let configuration = MirrorConfiguration(retryDelay: .milliseconds(5))
    static let timeout: Duration = .seconds(60)

    static func privateMirror(_ user: MirrorUser, _ database: any RecordDatabase) async throws -> Mirror<Todo> {
        try await Mirror<Todo>(database: database, scope: .private, user: user, configuration: configuration)
    }

    static func sharedMirror(_ user: MirrorUser, _ database: any RecordDatabase) async throws -> Mirror<Todo> {
        try await Mirror<Todo>(database: database, scope: .shared, user: user, configuration: configuration)
    }

    /// Alice's mirror with `t1` and `t2`, committed.
    static func alicesTodos(_ database: any RecordDatabase) async throws -> Mirror<Todo> {
        let mirror = try await privateMirror(alice, database)
        mirror.dataModel.append(Todo(id: "t1", title: "Plan the trip"))
        mirror.dataModel.append(Todo(id: "t2", title: "Alice's diary"))
        try await mirror.flush()
        return mirror
    }

    @Test(arguments: DatabaseFactory.all)
    func aShareReachesTheRecipientOnlyAndTheirEditReachesTheOwner(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try await Self.alicesTodos(opened.database)
        let bob = try await Self.sharedMirror(Self.bob, opened.database)
        let carol = try await Self.sharedMirror(Self.carol, opened.database)
        #expect(bob.dataModel.isEmpty)

        try await alice.share("t1", with: [Self.bob], access: .readWrite)
        try await bob.waitUntil(timeout: Self.timeout, "t1 shared with bob") { $0.array == [Todo(id: "t1", title: "Plan the trip")] }

        bob.dataModel[0].title = "Plan the trip to Lisbon"
        try await bob.flush()
        try await alice.waitUntil(timeout: Self.timeout, "bob's edit") { $0.first?.title == "Plan the trip to Lisbon" }
        #expect(alice.dataModel.count == 2)
        let stored = try #require(try await opened.database.fetch(["t1"], in: .private("Todo", user: "alice")).first)
        #expect(stored.version == 2)

        // Carol was given nothing: her shared mirror, and a new one, show nothing.
        try await carol.flush()
        #expect(carol.dataModel.isEmpty)
        #expect(try await Self.sharedMirror(Self.carol, opened.database).dataModel.isEmpty)
        #expect(try await carol.shares().isEmpty)
        #expect(try await opened.database.fetchAll(in: .shared("Todo", user: "carol")).records.isEmpty)

        let share = RecordShare(recordID: "t1", recordType: "Todo", owner: Self.alice, recipient: Self.bob, access: .readWrite)
        #expect(try await alice.shares() == [share])
        #expect(try await bob.shares() == [share])
    }

    @Test(arguments: DatabaseFactory.all)
    func aRevocationRemovesTheRecordFromAnOpenSharedMirror(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try await Self.alicesTodos(opened.database)
        try await alice.share("t1", with: [Self.bob, Self.carol])
        try await alice.share("t2", with: [Self.bob])
        let bob = try await Self.sharedMirror(Self.bob, opened.database)
        let carol = try await Self.sharedMirror(Self.carol, opened.database)
        #expect(Set(bob.dataModel.map(\.id)) == ["t1", "t2"])
        #expect(carol.dataModel.map(\.id) == ["t1"])

        let changes = bob.changes()
        try await alice.revokeShare(of: "t1", from: [Self.bob])
        try await bob.waitUntil(timeout: Self.timeout, "t1 gone from bob's mirror") { $0.map(\.id) == ["t2"] }
        var removal: MirrorChange<Todo>?
        for await change in changes where change.recordID == "t1" {
            removal = change
            break
        }
        #expect(removal?.kind == .removed)
        #expect(removal?.origin == .remote)
        // Carol's share stays; revoking again changes nothing.
        try await alice.revokeShare(of: "t1", from: [Self.bob])
        try await carol.flush()
        #expect(carol.dataModel.map(\.id) == ["t1"])
        #expect(alice.dataModel.count == 2, "the owner keeps the record")
        #expect(try await Self.sharedMirror(Self.bob, opened.database).dataModel.map(\.id) == ["t2"])
    }

    @Test(arguments: DatabaseFactory.all)
    func aRecordDeletedByItsOwnerLeavesTheSharedMirrorAndIsNotSharedWhenMadeAgain(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try await Self.alicesTodos(opened.database)
        try await alice.share("t1", with: [Self.bob])
        let bob = try await Self.sharedMirror(Self.bob, opened.database)
        #expect(bob.dataModel.map(\.id) == ["t1"])

        alice.dataModel.removeAll { $0.id == "t1" }
        try await alice.flush()
        try await bob.waitUntil(timeout: Self.timeout, "t1 gone") { $0.isEmpty }
        alice.dataModel.append(Todo(id: "t1", title: "another record, same id"))
        try await alice.flush()
        #expect(try await Self.sharedMirror(Self.bob, opened.database).dataModel.isEmpty)
        #expect(try await alice.shares().isEmpty)
    }

    @Test(arguments: DatabaseFactory.all)
    func sharingWhatIsNotStoredOrWithItsOwnerIsRefused(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try await Self.alicesTodos(opened.database)
        let missing = await #expect(throws: MirrorError.self) { try await alice.share("nope", with: [Self.bob]) }
        #expect(missing?.kind == .notFound)
        #expect(missing?.recordIDs == ["nope"])
        let own = await #expect(throws: MirrorError.self) { try await alice.share("t1", with: [Self.alice]) }
        #expect(own?.kind == .refused)
        let hostile = await #expect(throws: MirrorError.self) { try await alice.share("a/b", with: [Self.bob]) }
        #expect(hostile?.kind == .invalidName)
        #expect(try await alice.shares().isEmpty)

        // A record appended just before is committed first, then shared.
        alice.dataModel.append(Todo(id: "t3", title: "fresh"))
        try await alice.share("t3", with: [Self.bob])
        #expect(try await alice.shares().map(\.recordID) == ["t3"])
    }

    @Test(arguments: DatabaseFactory.all)
    func aSecondOwnerCannotShareAnIDTheRecipientAlreadyHas(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try await Self.alicesTodos(opened.database)
        let carol = try await Self.privateMirror(Self.carol, opened.database)
        carol.dataModel.append(Todo(id: "t1", title: "Carol's t1"))
        try await carol.flush()
        try await alice.share("t1", with: [Self.bob])
        let error = await #expect(throws: MirrorError.self) { try await carol.share("t1", with: [Self.bob]) }
        #expect(error?.kind == .refused)
        #expect(error?.recordIDs == ["t1"])
        let bob = try await Self.sharedMirror(Self.bob, opened.database)
        #expect(bob.dataModel.array == [Todo(id: "t1", title: "Plan the trip")])
        // Once alice revokes hers, carol's can be shared, and bob's open mirror shows carol's
        // record even if it never saw alice's go (carol's has a lower version: it is told
        // apart by its creation clock).
        try await alice.revokeShare(of: "t1", from: [Self.bob])
        try await carol.share("t1", with: [Self.bob])
        try await bob.waitUntil(timeout: Self.timeout, "carol's t1") { $0.array == [Todo(id: "t1", title: "Carol's t1")] }
        // Carol cannot revoke alice's shares, nor alice carol's.
        try await alice.revokeShare(of: "t1", from: [Self.bob])
        #expect(try await bob.shares().map(\.owner) == [Self.carol])
    }

    @Test(arguments: DatabaseFactory.all)
    func onlyPrivateUnsealedMirrorsOnASharingDatabaseShare(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let everyone = try await Mirror<Todo>(database: opened.database)
        everyone.dataModel.append(Todo(id: "p1", title: "public"))
        try await everyone.flush()
        let fromPublic = await #expect(throws: MirrorError.self) { try await everyone.share("p1", with: [Self.bob]) }
        #expect(fromPublic?.kind == .unsupported)
        let shared = try await Self.sharedMirror(Self.bob, opened.database)
        let fromShared = await #expect(throws: MirrorError.self) { try await shared.share("p1", with: [Self.carol]) }
        #expect(fromShared?.kind == .unsupported)

        let sealed = try await Mirror<Todo>(
            database: opened.database, scope: .private, user: Self.alice,
            configuration: MirrorConfiguration(cipher: InsecureTestCipher(keyID: "k", secret: "s")))
        sealed.dataModel.append(Todo(id: "s1", title: "sealed"))
        try await sealed.flush()
        let fromSealed = await #expect(throws: MirrorError.self) { try await sealed.share("s1", with: [Self.bob]) }
        #expect(fromSealed?.kind == .unsupported)

        let sealedShared = await #expect(throws: MirrorError.self) {
            _ = try await Mirror<Todo>(
                database: opened.database, scope: .shared, user: Self.bob,
                configuration: MirrorConfiguration(cipher: InsecureTestCipher(keyID: "k", secret: "s")))
        }
        #expect(sealedShared?.kind == .unsupported)
    }

    @Test func aDatabaseThatDoesNotShareSaysSo() async throws {
        let database = ScriptedDatabase(InMemoryDatabase())
        let mirror = try await Mirror<Todo>(database: database, scope: .private, user: Self.alice)
        let error = await #expect(throws: MirrorError.self) { try await mirror.share("t1", with: [Self.bob]) }
        #expect(error?.kind == .unsupported)
        let shared = await #expect(throws: MirrorError.self) { _ = try await Self.sharedMirror(Self.bob, database) }
        #expect(shared?.kind == .unsupported)
    }

    @Test func aSharedZoneNeedsItsRecipient() throws {
        let error = #expect(throws: MirrorError.self) { try ZoneID("Todo", scope: .shared, user: nil) }
        #expect(error?.kind == .invalidName)
        #expect(throws: MirrorError.self) { try ZoneID("Todo", scope: .shared, user: "..") }
        #expect(throws: MirrorError.self) { try ZoneID("Todo", scope: .shared, user: "a/b") }
        #expect(try ZoneID("Todo", scope: .shared, user: "bob") == .shared("Todo", user: "bob"))
        #expect(ZoneID.shared("Todo", user: "bob").description == "shared/bob/Todo")
    }
}
