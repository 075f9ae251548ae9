#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// ``MirrorUser``, ``UserSession`` and account verification.
@Suite(.timeLimit(.minutes(5))) struct MirrorUserTests {
    @Test func validNamesAreAccepted() throws {
        for name in ["alice", "Bob Smith", "ünïcødé", "user@example.com", String(repeating: "u", count: 255)] {
            #expect(try MirrorUser(name: name).name == name)
        }
    }

    @Test func invalidNamesAreRefused() {
        for name in ["", ".", "..", "a/b", "../root", "nul\0byte", String(repeating: "u", count: 256)] {
            let error = #expect(throws: MirrorError.self) { try MirrorUser(name: name) }
            #expect(error?.kind == .invalidName)
            #expect(error?.message.contains("user name") == true)
        }
    }

    @Test func theProcessOwnerIsTheOperatingSystemAccount() throws {
        let owner = MirrorUser.processOwner()
        #expect(try MirrorUser(name: owner.name) == owner)
        let systemName = NSUserName()
        if (try? MirrorUser(name: systemName)) != nil {
            #expect(owner.name == systemName)
        } else {
            #expect(owner.name.hasPrefix("uid-"))
        }
        #expect(UserSession().user == owner)
    }

    @Test func codesAsItsName() throws {
        let alice = try MirrorUser(name: "alice")
        let data = try JSONEncoder().encode([alice])
        #expect(String(decoding: data, as: UTF8.self) == #"["alice"]"#)
        #expect(try JSONDecoder().decode([MirrorUser].self, from: data) == [alice])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([MirrorUser].self, from: Data(#"["../x"]"#.utf8))
        }
    }

    // MARK: Verifying the private scope

    @Test func privateScopeOfAWorkingDatabaseIsAvailable() async throws {
        let status = try await MirrorUser(name: "alice").verifyAccountAuthentication(in: InMemoryDatabase())
        #expect(status.isAvailable)
    }

    @Test func unreachablePrivateScopeGivesAClearStatus() async throws {
        let database = UnreachableDatabase()
        let status = try await MirrorUser(name: "alice").verifyAccountAuthentication(in: database)
        guard case .unavailable(let error) = status else {
            Issue.record("expected unavailable, got \(status)")
            return
        }
        #expect(error.kind == .accountUnavailable)
        #expect(error.scope == .private)
        #expect(error.message.contains("alice"))
        #expect(error.message.contains("permission denied"))
        #expect(error.file == "/db/private/alice")
        #expect((error.underlying as? MirrorError)?.kind == .permissionDenied)
        #expect(database.probedZones.withLock { $0 } == [.private(MirrorUser.probeRecordType, user: "alice")])
    }

    @Test func databasesThatVerifyThemselvesAreAsked() async throws {
        let database = VerifyingDatabase()
        let alice = try MirrorUser(name: "alice")
        #expect(await alice.verifyAccountAuthentication(in: database).isAvailable)
        let bob = try MirrorUser(name: "bob")
        let status = await bob.verifyAccountAuthentication(in: database)
        #expect(!status.isAvailable)
        #expect(database.verified.withLock { $0 } == [alice, bob])
    }

    // MARK: The JSON-file database's private scope

    @Test func theJSONFileDatabaseMakesAPrivateDirectoryForItsOwnerAlone() async throws {
        let directory = try TemporaryDirectory("account-available")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let alice = try MirrorUser(name: "alice")
        let path = database.directory.appendingPathComponent("private/alice").path
        #expect(await alice.verifyAccountAuthentication(in: database).isAvailable)
        var info = stat()
        try #require(lstat(path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFDIR)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(info.st_uid == geteuid())

        // A wider mode is narrowed, as opening a private zone does.
        try #require(chmod(path, 0o755) == 0)
        #expect(await alice.verifyAccountAuthentication(in: database).isAvailable)
        try #require(lstat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        // And the private zones themselves open there.
        try await database.commit([jsonSave("a1", ["v": 1])], to: .private("Todo", user: "alice"))
        #expect(try await database.fetchAll(in: .private("Todo", user: "alice")).records.count == 1)
    }

    @Test func aPrivateDirectoryThatIsNotARealDirectoryOfThisUserIsUnavailable() async throws {
        let directory = try TemporaryDirectory("account-unavailable")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await MirrorUser(name: "setup").verifyAccountAuthentication(in: database).isAvailable)
        let privateDirectory = database.directory.appendingPathComponent("private")

        /// The status for `name`, which must be unavailable; returns its error.
        func unavailable(_ name: String) async throws -> MirrorError {
            let status = try await MirrorUser(name: name).verifyAccountAuthentication(in: database)
            guard case .unavailable(let error) = status else {
                Issue.record("\(name)'s private scope should be unavailable")
                throw MirrorError(.accountUnavailable, "available")
            }
            #expect(error.kind == .accountUnavailable)
            #expect(error.scope == .private)
            #expect(error.file == privateDirectory.appendingPathComponent(name).path)
            #expect(error.message.contains(name))
            return error
        }

        // A file where the directory should be (fails for root too).
        try Data("not a directory".utf8).write(to: privateDirectory.appendingPathComponent("mallory"))
        #expect(try await unavailable("mallory").message.contains("not a directory"))
        // A symbolic link out of the database.
        try FileManager.default.createSymbolicLink(
            atPath: privateDirectory.appendingPathComponent("eve").path, withDestinationPath: directory.path)
        #expect(try await unavailable("eve").message.contains("symbolic link"))
        // A directory of another user (only root can make one).
        if geteuid() == 0 {
            let oscar = privateDirectory.appendingPathComponent("oscar").path
            try FileManager.default.createDirectory(atPath: oscar, withIntermediateDirectories: false)
            try #require(chown(oscar, 54_321, 54_321) == 0)
            #expect(try await unavailable("oscar").message.contains("belongs to user id 54321"))
        }
        #expect(try String(contentsOf: privateDirectory.appendingPathComponent("mallory"), encoding: .utf8)
            == "not a directory", "nothing was changed")
    }

    // MARK: Switching users

    /// Records `.mirrorAccountChanged` notifications posted on a center of its own: the
    /// change and the session that posted it.
    final class AccountObserver {
        let center = NotificationCenter()
        let changes = ValueLog<(change: UserSession.Change, sender: ObjectIdentifier?)>()
        private var observer: (any NSObjectProtocol)?

        init() {
            observer = center.addObserver(forName: .mirrorAccountChanged, object: nil, queue: nil) {
                [changes] notification in
                guard let change = UserSession.Change(notification) else { return }
                let sender = (notification.object as AnyObject?).map(ObjectIdentifier.init)
                changes.append((change, sender))
            }
        }

        deinit {
            if let observer { center.removeObserver(observer) }
        }
    }

    @Test func switchingPostsExactlyOneNotification() throws {
        let observer = AccountObserver()
        let alice = try MirrorUser(name: "alice")
        let bob = try MirrorUser(name: "bob")
        let session = UserSession(user: alice, notificationCenter: observer.center)
        #expect(session.user == alice)

        let change = session.switchUser(to: bob)
        #expect(change == UserSession.Change(previous: alice, current: bob))
        #expect(session.user == bob)
        // Posted synchronously, once, by this session.
        let posted = observer.changes.all
        try #require(posted.count == 1)
        #expect(posted[0].change == UserSession.Change(previous: alice, current: bob))
        #expect(posted[0].sender == ObjectIdentifier(session))

        // Switching to the current user changes nothing and posts nothing.
        #expect(session.switchUser(to: bob) == nil)
        #expect(observer.changes.all.count == 1)
    }

    @Test func changesAreAlsoAnAsyncSequence() async throws {
        let alice = try MirrorUser(name: "alice")
        let bob = try MirrorUser(name: "bob")
        let session = UserSession(user: alice, notificationCenter: NotificationCenter())
        var iterator = session.changes().makeAsyncIterator()
        session.switchUser(to: bob)
        session.switchUser(to: bob)
        session.switchUser(to: alice)
        #expect(await iterator.next() == UserSession.Change(previous: alice, current: bob))
        #expect(await iterator.next() == UserSession.Change(previous: bob, current: alice))
    }

    /// Concurrent switches are announced once each and in the order they were applied, so
    /// the announcements chain from the first user to the final one.
    @Test func concurrentSwitchesAreAnnouncedInOrder() async throws {
        let observer = AccountObserver()
        let users = try (0..<8).map { try MirrorUser(name: "user-\($0)") }
        let session = UserSession(user: users[0], notificationCenter: observer.center)
        let made = await withTaskGroup(of: Int.self) { group in
            for round in 0..<200 {
                group.addTask { session.switchUser(to: users[round % users.count]) == nil ? 0 : 1 }
            }
            return await group.reduce(0, +)
        }
        let posted = observer.changes.all.map(\.change)
        #expect(posted.count == made)
        var expected = users[0]
        for change in posted {
            #expect(change.previous == expected)
            #expect(change.previous != change.current)
            expected = change.current
        }
        #expect(expected == session.user)
    }
}

/// A database whose private scope cannot be reached: reading a private zone fails.
private final class UnreachableDatabase: RecordDatabase, Sendable {
    let inner = InMemoryDatabase()
    let probedZones = Mutex<[ZoneID]>([])
    var identifier: String { inner.identifier }
    var writerID: String { inner.writerID }

    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try await inner.commit(operations, to: zone)
    }
    func fetchAll(in zone: ZoneID) async throws -> ChangeSet { try await inner.fetchAll(in: zone) }
    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await inner.fetch(recordIDs, in: zone)
    }
    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await inner.changes(in: zone, since: token)
    }
    func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        probedZones.withLock { $0.append(zone) }
        if zone.scope == .private {
            throw MirrorError(
                .permissionDenied, "open failed: permission denied", scope: .private,
                file: "/db/private/\(zone.user ?? "")")
        }
        return try await inner.currentToken(in: zone)
    }
    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try inner.subscribe(to: zone, handler: handler)
    }
}

/// A database that checks accounts itself: only alice may use the private scope.
private final class VerifyingDatabase: AccountVerifiable, Sendable {
    let inner = InMemoryDatabase()
    let verified = Mutex<[MirrorUser]>([])
    var identifier: String { inner.identifier }
    var writerID: String { inner.writerID }

    func verifyPrivateScope(of user: MirrorUser) async throws {
        verified.withLock { $0.append(user) }
        guard user.name == "alice" else {
            throw MirrorError(.permissionDenied, "not alice's database", scope: .private)
        }
    }

    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try await inner.commit(operations, to: zone)
    }
    func fetchAll(in zone: ZoneID) async throws -> ChangeSet { try await inner.fetchAll(in: zone) }
    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await inner.fetch(recordIDs, in: zone)
    }
    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await inner.changes(in: zone, since: token)
    }
    func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        Issue.record("a database that verifies accounts itself was probed")
        return try await inner.currentToken(in: zone)
    }
    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try inner.subscribe(to: zone, handler: handler)
    }
}
