import Foundation
import Synchronization
import MirrorTesting
import Testing

@testable import MagicMirror

/// How a commit reaches the mirrors of its own process: the committing mirror hears
/// nothing of it, the others once; the local notification posted for observers does not come
/// back to the mirrors; one zone's join does not wait for another's.
@Suite(.timeLimit(.minutes(5))) struct ZoneSubscriptionDeliveryTests {
    private let zone = ZoneID.public("Chore")

    /// A mirror's own commits wake nothing in it (not its membership of the zone's shared
    /// subscription, so not its pulling task); the zone's other mirror is woken.
    @Test(arguments: DatabaseFactory.all)
    func aMirrorDoesNotHearItsOwnCommit(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let committer = try await Mirror<Chore>(database: opened.database)
        let sibling = try await Mirror<Chore>(database: opened.database)
        let committerMembership = try #require(committer.core.withLock { $0.subscription })
        let siblingMembership = try #require(sibling.core.withLock { $0.subscription })
        let before = committerMembership.wakes
        for number in 0..<5 {
            committer.dataModel.append(Chore(id: "c\(number)", title: "\(number)"))
            try await committer.flush()
            try await waitUntil(sibling, "chore \(number)") { $0.count == number + 1 }
        }
        #expect(committerMembership.wakes == before, "the committing mirror heard its own commits")
        #expect(siblingMembership.wakes >= 1)

        // Another writer's commit still wakes both.
        let writer = try await opened.otherWriter()
        try await seed([Chore(id: "other", title: "from another writer")], into: writer)
        try await waitUntil(committer, "the other writer's chore") { $0.count == 6 }
        try await waitUntil(sibling, "the other writer's chore") { $0.count == 6 }
        #expect(committerMembership.wakes == before + 1)
    }

    /// The tokens of this process's writer delivered while a member commits are held for the
    /// end of its commit: it is woken with them only when they are newer than what it
    /// committed, or when its commit was not applied. Another writer's token wakes it at
    /// once. The other members are woken at once, and with the committed token when nothing
    /// delivered it.
    @Test func tokensDeliveredWhileAMemberCommitsAreHeldForIt() throws {
        let database = InMemoryDatabase()
        let committer = TokenCounter()
        let other = TokenCounter()
        let committing = try ZoneSubscriptions.join(committer, database: database, zone: zone)
        let watching = try ZoneSubscriptions.join(other, database: database, zone: zone)
        defer {
            committing.leave()
            watching.leave()
        }
        let key = ZoneSubscriptions.Key(identifier: database.identifier, zone: zone)
        func token(_ sequence: Int) -> ChangeToken { ChangeToken(generation: 0, sequence: sequence) }
        let own = database.writerID

        // Its own commit, delivered by the database before the commit returns.
        committing.beginCommit()
        ZoneSubscriptions.deliver(token(1), to: key, writer: own)
        committing.endCommit(upTo: token(1))
        #expect(committer.tokens == [])
        #expect(other.tokens == [token(1)])

        // Its own commit, and another one after it, delivered meanwhile.
        committing.beginCommit()
        ZoneSubscriptions.deliver(token(2), to: key, writer: own)
        ZoneSubscriptions.deliver(token(3), to: key, writer: own)
        committing.endCommit(upTo: token(2))
        #expect(committer.tokens == [token(3)])
        #expect(other.tokens == [token(1), token(2), token(3)])

        // A commit that failed: what was delivered meanwhile is someone else's.
        committing.beginCommit()
        ZoneSubscriptions.deliver(token(4), to: key, writer: own)
        committing.endCommit(upTo: nil)
        #expect(committer.tokens == [token(3), token(4)])

        // Another writer's commit while it commits: it hears it at once.
        committing.beginCommit()
        ZoneSubscriptions.deliver(token(5), to: key, writer: "another writer")
        #expect(committer.tokens == [token(3), token(4), token(5)])
        ZoneSubscriptions.deliver(token(6), to: key, writer: own)
        committing.endCommit(upTo: token(6))
        #expect(committer.tokens == [token(3), token(4), token(5)])

        // A database that tells nobody of the commit: the other members hear it from the
        // committing member.
        committing.beginCommit()
        committing.endCommit(upTo: token(7))
        #expect(committer.tokens == [token(3), token(4), token(5)])
        #expect(other.tokens == (1...7).map(token))
        #expect(committing.wakes == 3 && watching.wakes == 7)
    }

    /// A notification the mirrors' shared subscription routes to the converter reaches an
    /// observer of `NotificationCenter.default`, and does not come back to the mirrors
    /// through their own observer there; a payload the app converts still reaches them.
    @Test func theNotificationPostedForObserversDoesNotComeBackToTheMirrors() throws {
        let database = InMemoryDatabase()
        let member = TokenCounter()
        let membership = try ZoneSubscriptions.join(member, database: database, zone: zone)
        defer { membership.leave() }
        let posted = RemoteChangeRecorder(identifier: database.identifier)
        func notification(_ sequence: Int) -> RemoteNotification {
            RemoteNotification(
                databaseIdentifier: database.identifier, zone: zone, recordIDs: ["c\(sequence)"],
                reason: .created, token: ChangeToken(generation: 0, sequence: sequence))
        }

        MirrorNotificationRouting.route(notification(7))
        #expect(posted.notifications.items.map(\.token.sequence) == [7])
        #expect(member.tokens == [], "the mirrors' observer took back what their subscription posted")

        #expect(MirrorNotificationConverter().convertToLocal(from: notification(8).userInfo))
        #expect(posted.notifications.items.map(\.token.sequence) == [7, 8])
        #expect(member.tokens == [ChangeToken(generation: 0, sequence: 8)])
    }

    /// A join that subscribes (for the JSON-file database, reading the zone from disk) holds
    /// up the joins of its own zone only: another zone's join goes through meanwhile.
    @Test func aZoneLoadingDoesNotHoldUpAnotherZonesJoin() async throws {
        let slow = ZoneID.public("Slow")
        let database = GatedSubscriptions(gated: slow)
        let waiting = TokenCounter()
        let joined = AsyncCollector<Bool>()
        let slowJoin = Thread {
            let membership = try? ZoneSubscriptions.join(waiting, database: database, zone: slow)
            joined.append(membership != nil)
            membership?.leave()
        }
        slowJoin.start()
        defer { database.open() }
        try await database.subscribing.wait("the slow zone's subscription to start") { !$0.isEmpty }

        let other = TokenCounter()
        let otherJoined = AsyncCollector<Bool>()
        let otherJoin = Thread { [zone] in
            let membership = try? ZoneSubscriptions.join(other, database: database, zone: zone)
            otherJoined.append(membership != nil)
            membership?.leave()
        }
        otherJoin.start()
        try await otherJoined.wait("another zone's join while the slow zone subscribes") { $0 == [true] }
        #expect(joined.items.isEmpty)
        database.open()
        try await joined.wait("the slow zone's join") { $0 == [true] }
    }
}

/// An in-memory database whose subscriptions to one zone wait until ``open()`` is called.
private final class GatedSubscriptions: RecordDatabase {
    private let base = InMemoryDatabase()
    private let gated: ZoneID
    private let gate = DispatchSemaphore(value: 0)
    private let isOpen = Mutex(false)
    /// The zones whose subscription started.
    let subscribing = AsyncCollector<ZoneID>()

    init(gated: ZoneID) { self.gated = gated }

    /// Lets the waiting subscriptions (and later ones) through.
    func open() {
        let opening = isOpen.withLock { open in
            defer { open = true }
            return !open
        }
        if opening { gate.signal() }
    }

    var identifier: String { base.identifier }
    var writerID: String { base.writerID }

    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try await base.commit(operations, to: zone)
    }

    func fetchAll(in zone: ZoneID) async throws -> ChangeSet { try await base.fetchAll(in: zone) }

    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await base.fetch(recordIDs, in: zone)
    }

    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await base.changes(in: zone, since: token)
    }

    func currentToken(in zone: ZoneID) async throws -> ChangeToken { try await base.currentToken(in: zone) }

    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        subscribing.append(zone)
        if zone == gated {
            gate.wait()
            gate.signal()
        }
        return try base.subscribe(to: zone, handler: handler)
    }
}
