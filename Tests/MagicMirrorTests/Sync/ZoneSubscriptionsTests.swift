import Foundation
import Synchronization
import MirrorTesting
import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct ZoneSubscriptionsTests {
    private let zone = ZoneID.public("Chore")

    /// Each new token of a zone reaches each member of its shared subscription once, however
    /// it arrives: the database's subscription, the committing mirror, and the
    /// `.mirrorRemoteChange` notification the converter posts for observers.
    @Test(arguments: DatabaseFactory.all)
    func aCommitWakesEachMemberOnce(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = opened.database
        let committer = try await Mirror<Chore>(database: database)
        let sibling = try await Mirror<Chore>(database: database)
        let counter = TokenCounter()
        let membership = try ZoneSubscriptions.join(counter, database: database, zone: zone)
        defer { membership.leave() }
        let posted = RemoteChangeRecorder(identifier: database.identifier)

        // Three commits in a row by one mirror: the committing task hands each outcome to the
        // shared subscription before it takes the next batch, so by the time the third
        // commit is seen every hint of the first two has arrived.
        for number in 0..<3 {
            committer.dataModel.append(Chore(id: "c\(number)", title: "\(number)"))
            try await committer.flush()
            try await waitUntil(sibling, "chore \(number)") { $0.count == number + 1 }
        }
        let tokens = counter.tokens
        let firstTwo = tokens.filter { $0 < tokens.max()! }
        #expect(Set(firstTwo).count == firstTwo.count, "a token delivered twice: \(tokens)")
        #expect(Set(firstTwo).count == 2, "\(tokens)")

        // Another writer's commit: the database's subscription wakes the members, and the
        // notification the converter posts for observers wakes nobody again.
        let writer = try await opened.otherWriter()
        try await seed([Chore(id: "other", title: "from another writer")], into: writer)
        let latest = try await writer.currentToken(in: zone)
        try await waitUntil(committer, "the other writer's chore") { $0.count == 4 }
        try await waitUntil(sibling, "the other writer's chore") { $0.count == 4 }
        try await posted.notifications.wait("its notification") { $0.contains { $0.recordIDs == ["other"] } }
        #expect(counter.tokens.filter { $0 == latest }.count == 1, "\(counter.tokens)")
    }

    /// A token no newer than the highest delivered wakes nobody; a newer one wakes every
    /// member.
    @Test func repeatedTokensAreDropped() async throws {
        let database = InMemoryDatabase()
        let first = TokenCounter()
        let second = TokenCounter()
        let memberships = try [first, second].map { try ZoneSubscriptions.join($0, database: database, zone: zone) }
        defer { for membership in memberships { membership.leave() } }
        let key = ZoneSubscriptions.Key(identifier: database.identifier, zone: zone)
        let two = ChangeToken(generation: 0, sequence: 2)
        ZoneSubscriptions.deliver(two, to: key)
        ZoneSubscriptions.deliver(two, to: key)
        ZoneSubscriptions.deliver(ChangeToken(generation: 0, sequence: 1), to: key)
        ZoneSubscriptions.deliver(ChangeToken(generation: 1, sequence: 0), to: key)
        #expect(first.tokens == [two, ChangeToken(generation: 1, sequence: 0)])
        #expect(second.tokens == first.tokens)
        let counts = ZoneSubscriptions.counts(identifier: database.identifier, zone: zone)
        #expect(counts.subscriptions == 1 && counts.members == 2)
    }
}

/// A member of a shared zone subscription that records the tokens it is woken with.
final class TokenCounter: ZoneSubscriber {
    private let received = Mutex<[ChangeToken]>([])

    var tokens: [ChangeToken] { received.withLock { $0 } }

    func zoneChanged(upTo token: ChangeToken) {
        received.withLock { $0.append(token) }
    }
}
