import Foundation
import MagicMirror
import Synchronization
import Testing

/// Private mirrors follow their ``UserSession``: a switch moves them to the new user's zone
/// at once, and the old user's changes still go to the old user's zone.
@Suite(.timeLimit(.minutes(5))) struct MirrorUserSwitchTests {
    let alice = try! MirrorUser(name: "alice")
    let bob = try! MirrorUser(name: "bob")

    /// The stored chores of a user's private zone, by id.
    private func stored(_ user: MirrorUser, in database: any RecordDatabase) async throws -> [String: Chore] {
        let set = try await database.fetchAll(in: .private("Chore", user: user.name))
        var result: [String: Chore] = [:]
        for record in set.records {
            result[record.id] = try JSONDecoder().decode(Chore.self, from: #require(record.fields))
        }
        return result
    }

    /// Flushes a mirror, cancelling the flush (which then throws) if it takes longer than
    /// the test timeout, so that a change stuck on its way fails the test instead of hanging it.
    private func flush(_ mirror: Mirror<Chore>) async throws {
        let flushing = Task { try await mirror.flush() }
        let timer = Task {
            try await Task.sleep(for: testTimeout)
            flushing.cancel()
        }
        defer { timer.cancel() }
        try await flushing.value
    }

    /// Counts the account-changed notifications posted on a center.
    private final class AccountChangeCounter: Sendable {
        let changes = AsyncCollector<UserSession.Change>()
        private let observer: Mutex<(any NSObjectProtocol)?>
        private let center: NotificationCenter

        init(_ center: NotificationCenter) {
            self.center = center
            let changes = self.changes
            observer = Mutex(center.addObserver(forName: .mirrorAccountChanged, object: nil, queue: nil) { notification in
                if let change = UserSession.Change(notification) { changes.append(change) }
            })
        }

        deinit {
            if let observer = observer.withLock({ $0 }) { center.removeObserver(observer) }
        }
    }

    @Test(arguments: DatabaseFactory.all)
    func aUserSwitchMovesPrivateMirrorsToTheNewUser(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = opened.database
        let alices = [Chore(id: "a1", title: "alice's first"), Chore(id: "a2", title: "alice's second")]
        let bobs = [Chore(id: "b1", title: "bob's")]
        try await seed(alices, into: database, zone: .private("Chore", user: "alice"))
        try await seed(bobs, into: database, zone: .private("Chore", user: "bob"))
        let center = NotificationCenter()
        let session = UserSession(user: alice, notificationCenter: center)
        let announced = AccountChangeCounter(center)
        let configuration = MirrorConfiguration(userSession: session)

        let mine = try await Mirror<Chore>(database: database, scope: .private, configuration: configuration)
        let alicesForGood = try await Mirror<Chore>(
            database: database, scope: .private, user: try MirrorUser(name: "alice"), configuration: configuration)
        let everyones = try await Mirror<Chore>(database: database, configuration: configuration)
        #expect(mine.zone == .private("Chore", user: "alice"))
        #expect(mine.dataModel.array == alices)
        let seen = AsyncCollector(mine.changes())

        #expect(session.switchUser(to: bob) != nil)
        // At once: the mirror holds bob's zone and shows nothing of alice's.
        #expect(mine.zone == .private("Chore", user: "bob"))
        #expect(!mine.dataModel.contains { $0.id.hasPrefix("a") })
        try await waitUntil(mine, "bob's records") { $0 == bobs }
        #expect(announced.changes.items == [UserSession.Change(previous: alice, current: bob)])
        try await seen.wait(forCount: 3, "alice's records removed, bob's inserted")
        #expect(seen.items == [
            MirrorChange(kind: .removed, recordID: "a1", record: nil, origin: .remote, state: .committed),
            MirrorChange(kind: .removed, recordID: "a2", record: nil, origin: .remote, state: .committed),
            MirrorChange(kind: .inserted, recordID: "b1", record: bobs[0], origin: .remote, state: .committed),
        ])
        // Mirrors that name their user, or are public, stay where they are.
        #expect(alicesForGood.zone == .private("Chore", user: "alice"))
        #expect(alicesForGood.dataModel.array == alices)
        #expect(everyones.zone == .public("Chore"))

        // A change made now is bob's.
        let added = Chore(id: "b2", title: "added after the switch")
        mine.dataModel.append(added)
        try await flush(mine)
        #expect(try await stored(bob, in: database) == ["b1": bobs[0], "b2": added])
        #expect(try await stored(alice, in: database).keys.sorted() == ["a1", "a2"])

        // Back and forth: the mirror ends with the latest user, and each switch was
        // announced once.
        session.switchUser(to: alice)
        session.switchUser(to: bob)
        session.switchUser(to: alice)
        try await waitUntil(mine, "alice's records again") { $0.sorted { $0.id < $1.id } == alices }
        #expect(announced.changes.items.count == 4)
        #expect(mine.zone == .private("Chore", user: "alice"))
        #expect(session.switchUser(to: alice) == nil, "switching to the current user does nothing")
        #expect(announced.changes.items.count == 4)
    }

    @Test(arguments: DatabaseFactory.all)
    func theOldUsersUncommittedChangesGoToTheOldUsersZone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let session = UserSession(user: alice, notificationCenter: NotificationCenter())
        let mirror = try await Mirror<Chore>(
            database: database, scope: .private, configuration: MirrorConfiguration(userSession: session))
        let seen = AsyncCollector(mirror.changes())

        // One of alice's changes is being committed when the user switches, another waits.
        database.hold()
        let sent = Chore(id: "x1", title: "alice's, in flight")
        mirror.dataModel.append(sent)
        try await database.heldCommits.wait(forCount: 1, "the commit to start")
        let waiting = Chore(id: "x2", title: "alice's, waiting")
        mirror.dataModel.append(waiting)
        session.switchUser(to: bob)
        #expect(mirror.dataModel.isEmpty)
        #expect(mirror.pendingChanges.isEmpty, "pendingChanges lists the current user's only")
        let bobs = Chore(id: "y1", title: "bob's")
        mirror.dataModel.append(bobs)
        database.release()
        try await flush(mirror)  // waits for alice's changes too

        #expect(try await stored(alice, in: database) == ["x1": sent, "x2": waiting])
        #expect(try await stored(bob, in: database) == ["y1": bobs])
        #expect(mirror.dataModel.array == [bobs])
        #expect(!mirror.hasPendingChanges)
        // After the switch, the mirror spoke only of bob's records (and of alice's leaving).
        let afterSwitch = seen.items.drop { $0.recordID != "x1" || $0.kind != .removed }
        #expect(afterSwitch.map { "\($0.kind) \($0.recordID) \($0.state)" } == [
            "removed x1 committed", "removed x2 committed", "inserted y1 pending", "inserted y1 committed",
        ])
    }
}
