import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// `ReplicatedDatabase`: a mirror over a remote database keeps working, and loses nothing,
/// while the remote is away. The remote is an `InMemoryDatabase` (its availability switch
/// stands for the network); "another process" is a second `ReplicatedDatabase` on the same
/// replica directory with a JSON-file engine of its own. The real-process scenarios are in
/// `ReplicatedProcessTests`.
@Suite(.timeLimit(.minutes(5))) struct ReplicatedDatabaseTests {
    struct Note: Recordable, Hashable {
        var id: String
        var title: String
        var body = ""
    }

    static let zone = ZoneID.public("Note")
    static let timeout = Duration.seconds(120)

    /// A replicated database over `remote` with its replica in `replica`, opened as a new
    /// process would open it (its own JSON-file engine and writer id).
    static func open(_ replica: TemporaryDirectory, remote: any RecordDatabase) throws -> ReplicatedDatabase {
        ReplicatedDatabase(
            local: try JSONFileDatabase(isolatedDirectory: replica.url), remote: remote,
            retryDelay: .milliseconds(5), maximumRetryDelay: .milliseconds(50))
    }

    static func notes(in database: any RecordDatabase, zone: ZoneID = zone) async throws -> [Note] {
        try await database.fetchAll(in: zone).records.map { record in
            try JSONDecoder().decode(Note.self, from: #require(record.fields))
        }.sorted { $0.id < $1.id }
    }

    static func waitForStatus(
        _ database: ReplicatedDatabase, _ what: String, _ condition: @escaping @Sendable (ReplicationStatus) -> Bool
    ) async throws {
        try await database.statusUpdates.waitUntil(timeout: timeout, what, satisfies: condition)
    }

    @Test func aMirrorOpensFromTheReplicaWithoutTheRemote() async throws {
        let replica = try TemporaryDirectory("replica-open")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "a", title: "from the server"))
        do {
            let online = try Self.open(replica, remote: remote)
            let mirror = try await Mirror<Note>(database: online)
            try await online.synchronize()
            try await waitUntil(mirror, "the remote's record") { $0.map(\.id) == ["a"] }
        }

        remote.availability = .unavailable
        let offline = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: offline)
        // Loaded from the replica, before any exchange with the remote.
        #expect(mirror.dataModel.array == [Note(id: "a", title: "from the server")])
        try await Self.waitForStatus(offline, "offline") { $0.phase == .offline }
        await #expect(throws: MirrorError.self) { try await offline.synchronize() }
    }

    @Test func aNewReplicaOpensEmptyWhileTheRemoteIsAway() async throws {
        let replica = try TemporaryDirectory("replica-empty")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "a", title: "on the server"))
        remote.availability = .unavailable
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: database)
        #expect(mirror.dataModel.isEmpty)
        remote.availability = .available
        try await database.synchronize()
        try await waitUntil(mirror, "the remote's record") { $0.map(\.id) == ["a"] }
    }

    /// Changes made while the remote is away are durable in the replica (flush succeeds),
    /// counted as waiting, pushed in order when the remote is back, and the outage is
    /// reported once however many retries fail.
    @Test func offlineEditsArePushedWhenTheRemoteIsBackAndTheOutageIsReportedOnce() async throws {
        let replica = try TemporaryDirectory("replica-push")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        remote.availability = .unavailable
        let database = try Self.open(replica, remote: remote)
        let statuses = AsyncCollector(database.statusUpdates)
        let mirror = try await Mirror<Note>(database: database)
        mirror.dataModel.append(Note(id: "b", title: "first"))
        try await mirror.flush()   // durable locally, remote or not
        mirror.dataModel.append(Note(id: "a", title: "second"))
        try await mirror.flush()
        mirror.dataModel[1].title = "second, edited"
        try await mirror.flush()
        #expect(mirror.pendingChanges.isEmpty)
        try await Self.waitForStatus(database, "two changes waiting, offline") {
            $0.phase == .offline && $0.pendingChanges == 2
        }
        // Several retries fail; the outage is one problem and one transition.
        try await remote.commitLogUpdates.waitUntil(timeout: Self.timeout, "three failed pushes") {
            $0.filter(\.isFailed).count >= 3
        }
        #expect(database.problems.count == 1)
        #expect(database.problems.first?.kind == .unavailable)
        let phases = statuses.items.map(\.phase)
        let wentOffline = phases.indices.filter { phases[$0] == .offline && ($0 == 0 || phases[$0 - 1] != .offline) }
        #expect(wentOffline.count == 1, "\(phases)")
        #expect(database.status.lastSuccessfulSync == nil)

        remote.availability = .available
        try await database.synchronize()
        #expect(try await Self.notes(in: remote) == [
            Note(id: "a", title: "second, edited"), Note(id: "b", title: "first"),
        ])
        // In order: the oldest change first (b, then a), in one commit.
        let pushes = remote.commitLog.filter(\.isApplied)
        #expect(pushes.count == 1)
        #expect(pushes.first?.recordIDs == ["b", "a"])
        #expect(pushes.first?.operations.allSatisfy { $0.baseVersion == 0 } == true)
        let status = database.status
        #expect(status.phase == .online)
        #expect(status.pendingChanges == 0)
        #expect(status.lastSuccessfulSync != nil)
        #expect(database.problems.count == 1)
        #expect(mirror.dataModel.array.map(\.title) == ["first", "second, edited"])
    }

    /// An edit made offline, with another writer's edit of the same record meanwhile, is
    /// settled by the mirror's conflict policy against the version it was based on.
    @Test(arguments: ["changedKeys", "lastWriterWins", "serverWins", "custom"])
    func offlineEditsConvergeWithAnotherWritersChangesUnderEachPolicy(policy name: String) async throws {
        let replica = try TemporaryDirectory("replica-conflict")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "n", title: "title", body: "body"))
        let database = try Self.open(replica, remote: remote)
        let policy: ConflictPolicy<Note> = switch name {
        case "changedKeys": .changedKeys
        case "lastWriterWins": .lastWriterWins
        case "serverWins": .serverWins
        default: .custom { _, local, remote in
            Note(id: local.id, title: local.title + " + " + remote.title, body: remote.body)
        }
        }
        let mirror = try await Mirror<Note>(database: database, conflictPolicy: policy)
        try await database.synchronize()
        try await waitUntil(mirror, "the remote's record") { $0.count == 1 }

        remote.availability = .unavailable
        mirror.dataModel[0].title = "local title"
        try await mirror.flush()
        // Another writer, later: changes the body (and the title, for lastWriterWins).
        try await remote.simulateSave(Note(id: "n", title: "title", body: "remote body"))
        remote.availability = .available
        try await database.synchronize()

        let expected = switch name {
        case "changedKeys": Note(id: "n", title: "local title", body: "remote body")
        case "lastWriterWins", "serverWins": Note(id: "n", title: "title", body: "remote body")
        default: Note(id: "n", title: "local title + title", body: "remote body")
        }
        #expect(try await Self.notes(in: remote) == [expected])
        try await waitUntil(mirror, "the settled record") { $0 == [expected] }
        #expect(database.status.pendingChanges == 0)
        // The local change was based on the version it was made from (1); the remote had 2.
        let pushes = remote.commitLog.filter { !$0.isSimulated && !$0.isFailed && $0.recordIDs == ["n"] }
        #expect(pushes.first?.operations.first?.baseVersion == 1)
        #expect(pushes.first?.isConflict == true)
    }

    /// A change the remote refuses for a reason retrying cannot fix is held and reported
    /// once; the others go through.
    @Test func aChangeTheRemoteRefusesForGoodIsHeldAndTheOthersGoThrough() async throws {
        let replica = try TemporaryDirectory("replica-refused")
        defer { replica.remove() }
        let memory = InMemoryDatabase()
        // Refuses every commit naming "bad", as a server refuses a record its schema rejects.
        let remote = ScriptedDatabase(memory)
        remote.poison("bad", with: .invalidRecord)
        memory.availability = .unavailable
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: database)
        mirror.dataModel.append(Note(id: "good1", title: "one"))
        mirror.dataModel.append(Note(id: "bad", title: "refused"))
        mirror.dataModel.append(Note(id: "good2", title: "two"))
        try await mirror.flush()
        memory.availability = .available

        await #expect(throws: MirrorError.self) { try await database.synchronize() }
        #expect(try await Self.notes(in: memory).map(\.id) == ["good1", "good2"])
        let status = database.status
        #expect(status.pendingChanges == 1)
        #expect(status.heldChanges == 1)
        #expect(status.phase == .online)
        let held = database.problems.filter { $0.recordIDs == ["bad"] }
        #expect(held.count == 1)
        #expect(held.first?.kind == .invalidRecord)
        // Still shown locally, and reported once however often it is tried.
        #expect(mirror.dataModel.array.map(\.id) == ["good1", "bad", "good2"])
        await #expect(throws: MirrorError.self) { try await database.synchronize() }
        #expect(database.problems.filter { $0.recordIDs == ["bad"] }.count == 1)

        // Changing it again releases it.
        remote.poison("nothing-any-more", with: .invalidRecord)
        mirror.dataModel[1].title = "accepted now"
        try await mirror.flush()
        try await database.synchronize()
        #expect(try await Self.notes(in: memory).map(\.title) == ["accepted now", "one", "two"])
        #expect(database.status.heldChanges == 0)
    }

    /// A push the remote already stored (by a process killed before it could note so) is
    /// recognised, not pushed again.
    @Test func aChangeTheRemoteAlreadyStoredIsNotPushedTwice() async throws {
        let replica = try TemporaryDirectory("replica-once")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        remote.availability = .unavailable
        let database = try Self.open(replica, remote: remote)
        // A policy that would store a second version if the push were taken for a conflict.
        let mirror = try await Mirror<Note>(database: database, conflictPolicy: .custom { _, local, _ in
            Note(id: local.id, title: local.title + " (merged)")
        })
        mirror.dataModel.append(Note(id: "n", title: "once"))
        try await mirror.flush()

        // What waits in the replica, pushed by "an earlier process" under its own writer id.
        let entry = try #require(try await database.local.fetch(["n"], in: Self.zone).first?.fields)
        let envelope = try #require(try JSONSerialization.jsonObject(with: entry) as? [String: Any])
        let waiting = try #require(envelope["local"] as? [String: Any])
        let clock = try #require(waiting["timestamp"] as? String)
        let timestamp = try #require(HLCTimestamp(clock))
        let pushedFields = try JSONSerialization.data(withJSONObject: try #require(waiting["fields"]), options: [.sortedKeys])
        try await remote.writer(named: "killed-process").commit(
            [.save("n", fields: pushedFields, baseVersion: 0, timestamp: timestamp)], to: Self.zone)

        remote.availability = .available
        try await database.synchronize()
        let stored = try #require(try await remote.fetch(["n"], in: Self.zone).first)
        #expect(stored.version == 1)
        #expect(remote.commitLog.filter { $0.isApplied && $0.recordIDs == ["n"] }.count == 1)
        #expect(database.status.pendingChanges == 0)
        #expect(mirror.dataModel.array == [Note(id: "n", title: "once")])
    }

    /// Unreadable replica entries: the zone is reloaded from the remote, the readable local
    /// changes are kept and pushed, and the rebuild is reported.
    @Test func aCorruptReplicaIsRebuiltFromTheRemoteKeepingReadableLocalChanges() async throws {
        let replica = try TemporaryDirectory("replica-corrupt")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "a", title: "alpha"))
        try await remote.simulateSave(Note(id: "b", title: "beta"))
        do {
            let database = try Self.open(replica, remote: remote)
            let mirror = try await Mirror<Note>(database: database)
            try await database.synchronize()
            try await waitUntil(mirror, "both records") { $0.count == 2 }
            remote.availability = .unavailable
            mirror.dataModel.append(Note(id: "c", title: "made offline"))
            try await mirror.flush()
        }
        // Damage the replica's line of record b.
        let journal = try #require(try FileManager.default.contentsOfDirectory(
            at: replica.url.appendingPathComponent("public/Note"), includingPropertiesForKeys: nil
        ).first { $0.lastPathComponent.hasPrefix("journal-") })
        var lines = try JSONFileTestSupport.journalText(journal).split(separator: "\n", omittingEmptySubsequences: false)
        let damaged = try #require(lines.firstIndex { $0.contains(#""id":"b""#) })
        lines[damaged] = Substring(String(repeating: "#", count: lines[damaged].count))
        try lines.joined(separator: "\n").write(to: journal, atomically: false, encoding: .utf8)

        remote.availability = .available
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: database)
        try await database.synchronize()
        try await waitUntil(mirror, "the rebuilt zone") { $0.map(\.id).sorted() == ["a", "b", "c"] }
        #expect(try await Self.notes(in: remote).map(\.id) == ["a", "b", "c"])
        #expect(database.problems.contains { $0.kind == .corruptEntry && $0.message.contains("reloaded from the remote") })
        #expect(database.local.problems.contains { $0.kind == .corruptEntry })
    }

    /// The remote rewrote its history (compaction dropped a deletion's tombstone): the
    /// replica gets the complete zone and drops what the remote no longer lists, keeping
    /// what waits locally.
    @Test func aNewGenerationOfTheRemoteIsTakenWhole() async throws {
        let replica = try TemporaryDirectory("replica-generation")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "a", title: "alpha"))
        let gone = Note(id: "b", title: "beta")
        try await remote.simulateSave(gone)
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: database)
        try await database.synchronize()
        try await waitUntil(mirror, "both records") { $0.count == 2 }

        remote.availability = .unavailable
        mirror.dataModel.append(Note(id: "c", title: "waiting"))
        try await mirror.flush()
        try await remote.simulateDelete(gone)
        remote.compact(Self.zone)
        remote.availability = .available
        try await database.synchronize()
        try await waitUntil(mirror, "b gone, c kept") { $0.map(\.id).sorted() == ["a", "c"] }
        #expect(try await Self.notes(in: remote).map(\.id) == ["a", "c"])
    }

    @Test func aDeletedReplicaIsRefilledFromTheRemote() async throws {
        let replica = try TemporaryDirectory("replica-deleted")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        try await remote.simulateSave(Note(id: "a", title: "alpha"))
        do {
            let database = try Self.open(replica, remote: remote)
            _ = try await Mirror<Note>(database: database)
            try await database.synchronize()
        }
        try FileManager.default.removeItem(at: replica.url)
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(database: database)
        try await database.synchronize()
        try await waitUntil(mirror, "the remote's record") { $0.map(\.id) == ["a"] }
    }

    /// Private replicas are private zones of the replica (0700/0600), one per user, and
    /// each user's changes go to that user's remote zone only.
    @Test func privateReplicasAreTheirUsersAloneAndKeptApart() async throws {
        let replica = try TemporaryDirectory("replica-private")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        let database = try Self.open(replica, remote: remote)
        let alice = try await Mirror<Note>(database: database, scope: .private, user: try MirrorUser(name: "alice"))
        let bob = try await Mirror<Note>(database: database, scope: .private, user: try MirrorUser(name: "bob"))
        alice.dataModel.append(Note(id: "a", title: "alice's"))
        bob.dataModel.append(Note(id: "b", title: "bob's"))
        try await alice.flush()
        try await bob.flush()
        try await database.synchronize()

        #expect(try await Self.notes(in: remote, zone: .private("Note", user: "alice")).map(\.id) == ["a"])
        #expect(try await Self.notes(in: remote, zone: .private("Note", user: "bob")).map(\.id) == ["b"])
        #expect(alice.dataModel.array.map(\.id) == ["a"])
        #expect(bob.dataModel.array.map(\.id) == ["b"])
        let zone = replica.url.appendingPathComponent("private/alice/Note")
        let mode = { (url: URL) throws -> Int in
            try #require(try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) & 0o777
        }
        #expect(try mode(replica.url.appendingPathComponent("private/alice")) == 0o700)
        #expect(try mode(zone) == 0o700)
        for file in try FileManager.default.contentsOfDirectory(at: zone, includingPropertiesForKeys: nil) {
            #expect(try mode(file) == 0o600, "\(file.lastPathComponent)")
        }
    }

    /// A user switch moves a private mirror to the new user's replica zone; the old user's
    /// waiting changes still go to the old user's zone on the remote, and nothing mixes.
    @Test func aUserSwitchKeepsUsersReplicasApart() async throws {
        let replica = try TemporaryDirectory("replica-switch")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        remote.availability = .unavailable
        let session = UserSession(user: try MirrorUser(name: "carol"), notificationCenter: NotificationCenter())
        let database = try Self.open(replica, remote: remote)
        let mirror = try await Mirror<Note>(
            database: database, scope: .private, configuration: MirrorConfiguration(userSession: session))
        mirror.dataModel.append(Note(id: "c", title: "carol's, offline"))
        try await mirror.flush()
        _ = session.switchUser(to: try MirrorUser(name: "dave"))
        try await waitUntil(mirror, "dave's empty zone") { $0.isEmpty }
        mirror.dataModel.append(Note(id: "d", title: "dave's, offline"))
        try await mirror.flush()

        remote.availability = .available
        try await database.synchronize()
        #expect(try await Self.notes(in: remote, zone: .private("Note", user: "carol")).map(\.id) == ["c"])
        #expect(try await Self.notes(in: remote, zone: .private("Note", user: "dave")).map(\.id) == ["d"])
        #expect(try await Self.notes(in: database, zone: .private("Note", user: "carol")).map(\.id) == ["c"])
        #expect(mirror.dataModel.array.map(\.id) == ["d"])
        #expect(database.status.pendingChanges == 0)
    }

    /// Two processes sharing one replica see each other's changes at once and settle their
    /// conflicts locally, as over a shared JSON-file database.
    @Test func twoInstancesSharingAReplicaSeeEachOtherOffline() async throws {
        let replica = try TemporaryDirectory("replica-shared")
        defer { replica.remove() }
        let remote = InMemoryDatabase()
        remote.availability = .unavailable
        let first = try Self.open(replica, remote: remote)
        let second = try Self.open(replica, remote: remote)
        let a = try await Mirror<Note>(database: first)
        let b = try await Mirror<Note>(database: second)
        a.dataModel.append(Note(id: "n", title: "from a", body: "a"))
        try await a.flush()
        try await waitUntil(b, "a's record") { $0.map(\.title) == ["from a"] }
        b.dataModel[0].body = "b"
        try await b.flush()
        try await waitUntil(a, "b's edit") { $0.first?.body == "b" }

        remote.availability = .available
        try await first.synchronize()
        try await second.synchronize()
        #expect(try await Self.notes(in: remote) == [Note(id: "n", title: "from a", body: "b")])
        #expect(first.status.pendingChanges == 0)
        #expect(second.status.pendingChanges == 0)
    }

    @Test func theReservedRecordIDIsRefused() async throws {
        let replica = try TemporaryDirectory("replica-reserved")
        defer { replica.remove() }
        let database = try Self.open(replica, remote: InMemoryDatabase())
        let error = await #expect(throws: MirrorError.self) {
            try await database.commit(
                [.save("~replication", fields: Data("{}".utf8), baseVersion: 0, timestamp: .init(millis: 1))],
                to: Self.zone)
        }
        #expect(error?.kind == .invalidName)
        #expect(error?.nothingStored == true)
    }
}

/// The public `RecordDatabase` conformance suite, run on a `ReplicatedDatabase` (the
/// records mirrors see, served by the replica) over an unreachable `InMemoryDatabase`.
///
/// The remote is away so the database is quiet: online, the background exchange writes the
/// replica (the remote's token, accepted pushes), which moves the zone's token between two
/// calls without a visible change. The contract allows that, but checks written for a
/// database with no other writer (the token after a commit equals the token of the next
/// `changes(since:)`) would then race with it.
@Suite(.timeLimit(.minutes(5))) struct ReplicatedDatabaseConformanceTests {
    @Test(arguments: RecordDatabaseConformance.checks)
    func conforms(to check: ConformanceCheck) async throws {
        try await check.run {
            let replica = try TemporaryDirectory("replica-conformance")
            let remote = InMemoryDatabase()
            remote.availability = .unavailable
            let database = try ReplicatedDatabaseTests.open(replica, remote: remote)
            return DatabaseUnderTest(
                database: database,
                otherWriter: { try ReplicatedDatabaseTests.open(replica, remote: remote) },
                startNewGeneration: { zone in try await database.local.compact(zone) },
                cleanup: { replica.remove() })
        }
    }
}
