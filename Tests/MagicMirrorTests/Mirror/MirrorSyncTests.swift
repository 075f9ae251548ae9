import Foundation
@testable import MagicMirror
import Testing

/// Several mirrors in one process, remote changes, and the change stream.
@Suite(.timeLimit(.minutes(5))) struct MirrorSyncTests {
    @Test(arguments: DatabaseFactory.all)
    func mirrorsOfOneZoneSeeEachOthersChangesExactlyOnce(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let first = try await Mirror<Chore>(database: opened.database)
        let second = try await Mirror<Chore>(database: opened.database)
        let third = try await Mirror<Chore>(database: try await opened.otherWriter())
        let seenBySecond = AsyncCollector(second.changes())
        let seenByThird = AsyncCollector(third.changes())

        let chore = Chore(title: "shared")
        first.dataModel.append(chore)
        try await first.flush()
        for mirror in [second, third] {
            try await waitUntil(mirror, "the append") { $0 == [chore] }
        }
        first.dataModel[0].done = true
        try await first.flush()
        for mirror in [second, third] {
            try await waitUntil(mirror, "the edit") { $0.first?.done == true }
        }
        first.dataModel.removeAll()
        try await first.flush()
        for mirror in [second, third] {
            try await waitUntil(mirror, "the removal") { $0.isEmpty }
        }

        // Each change arrived once, as a committed remote change, in order.
        for seen in [seenBySecond, seenByThird] {
            try await seen.wait(forCount: 3, "three changes")
            #expect(seen.items.map(\.kind) == [.inserted, .updated, .removed])
            #expect(seen.items.allSatisfy { $0.origin == .remote && $0.state == .committed })
            #expect(seen.items.allSatisfy { $0.recordID == chore.id })
            #expect(seen.items.first?.record == chore)
        }
        // And nothing more arrives after a further change elsewhere.
        let later = Chore(title: "later")
        third.dataModel.append(later)
        try await third.flush()
        try await waitUntil(second, "the later chore") { $0 == [later] }
        try await seenBySecond.wait(forCount: 4, "the fourth change")
        #expect(seenBySecond.items.count == 4)
        #expect(seenByThird.items.filter { $0.recordID == later.id }.map(\.state) == [.pending, .committed])
    }

    @Test(arguments: DatabaseFactory.all)
    func mirrorsOfOneZoneShareOneSubscription(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let zone = ZoneID.public("Chore")
        var mirrors: [Mirror<Chore>] = []
        for _ in 0..<3 { mirrors.append(try await Mirror<Chore>(database: database)) }
        let other = try await Mirror<Chore>(database: database, scope: .private, user: try MirrorUser(name: "someone"))

        #expect(database.subscribeCalls == 2)
        #expect(database.liveSubscriptions == 2)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).subscriptions == 1)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).members == 3)

        // The subscription ends with the last mirror of the zone.
        let ends = mirrors.map { AsyncCollector($0.changes()) }
        mirrors.removeLast(2)
        try await ends[1].waitForEnd("a mirror to go away")
        try await ends[2].waitForEnd("a mirror to go away")
        #expect(database.liveSubscriptions == 2)
        mirrors.removeAll()
        try await ends[0].waitForEnd("the last mirror to go away")
        #expect(database.liveSubscriptions == 1)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).subscriptions == 0)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).members == 0)
        _ = other
    }

    @Test(arguments: DatabaseFactory.all)
    func changesByAnotherWriterArriveByThemselves(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)
        let seen = AsyncCollector(mirror.changes())
        let writer = try await opened.otherWriter()
        let zone = ZoneID.public("Chore")
        let chore = Chore(title: "from elsewhere")

        try await seed([chore], into: writer)
        try await waitUntil(mirror, "the remote insert") { $0 == [chore] }
        let edited = Chore(id: chore.id, title: chore.title, notes: "edited elsewhere")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await writer.commit(
            [.save(chore.id, fields: try encoder.encode(edited), baseVersion: 1, timestamp: HybridLogicalClock.shared.now())],
            to: zone)
        try await waitUntil(mirror, "the remote edit") { $0 == [edited] }
        try await writer.commit([.delete(chore.id, baseVersion: 2, timestamp: HybridLogicalClock.shared.now())], to: zone)
        try await waitUntil(mirror, "the remote delete") { $0.isEmpty }

        try await seen.wait(forCount: 3, "three remote changes")
        #expect(seen.items == [
            MirrorChange(kind: .inserted, recordID: chore.id, record: chore, origin: .remote, state: .committed),
            MirrorChange(kind: .updated, recordID: chore.id, record: edited, origin: .remote, state: .committed),
            MirrorChange(kind: .removed, recordID: chore.id, record: nil, origin: .remote, state: .committed),
        ])
        #expect(mirror.pendingChanges.isEmpty)
    }

    @Test(arguments: DatabaseFactory.all)
    func localChangesArePendingThenCommitted(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: database)
        let seen = AsyncCollector(mirror.changes())
        database.hold()

        let chore = Chore(title: "local")
        mirror.dataModel.append(chore)
        try await seen.wait(forCount: 1, "the pending insert")
        #expect(seen.items == [
            MirrorChange(kind: .inserted, recordID: chore.id, record: chore, origin: .local, state: .pending),
        ])
        #expect(seen.items.first?.isPending == true)
        database.release()
        try await mirror.flush()
        mirror.dataModel[0].rank = 3
        mirror.dataModel.remove(at: 0)
        try await mirror.flush()

        try await seen.wait(forCount: 5, "every change")
        let events = seen.items.map { "\($0.kind) \($0.origin) \($0.state)" }
        #expect(events == [
            "inserted local pending", "inserted local committed",
            "updated local pending", "removed local pending", "removed local committed",
        ])
    }

    @Test(arguments: DatabaseFactory.all)
    func aMissedOrRepeatedNotificationLeavesTheArrayRight(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mirror = try await Mirror<Chore>(database: opened.database)
        let seen = AsyncCollector(mirror.changes())
        let writer = try await opened.otherWriter()
        let chores = (0..<3).map { Chore(id: "c\($0)", title: "\($0)") }
        try await seed(chores, into: writer)
        try await waitUntil(mirror, "three chores") { $0.count == 3 }

        // The same hint, again and again, and one from the past: nothing more happens.
        let token = try await opened.database.currentToken(in: .public("Chore"))
        for _ in 0..<5 {
            ZoneSubscriptions.deliver(RemoteNotification(
                databaseIdentifier: opened.database.identifier, zone: .public("Chore"),
                recordIDs: ["c0"], reason: .created, token: token))
        }
        ZoneSubscriptions.deliver(RemoteNotification(
            databaseIdentifier: opened.database.identifier, zone: .public("Chore"),
            recordIDs: ["c0"], reason: .created, token: .initial))
        try await seed([Chore(id: "c3", title: "3")], into: writer)
        try await waitUntil(mirror, "four chores") { $0.count == 4 }
        #expect(seen.items.count == 4)
        #expect(Set(mirror.dataModel.map(\.id)).count == 4)
    }

    @Test(arguments: DatabaseFactory.all)
    func aCompactedHistoryReloadsAndFindsDeletes(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let zone = ZoneID.public("Chore")
        let chores = (0..<4).map { Chore(id: "c\($0)", title: "\($0)") }
        try await seed(chores, into: opened.database)
        let writer = try await opened.otherWriter()
        let reader = ScriptedDatabase(opened.database)
        let mirror = try await Mirror<Chore>(database: reader)
        // While this mirror cannot pull, another writer deletes two records and compacts,
        // dropping their tombstones, then commits once more.
        reader.holdPulls()
        try await writer.commit(
            [.delete("c1", baseVersion: 1, timestamp: HybridLogicalClock.shared.now()),
             .delete("c2", baseVersion: 1, timestamp: HybridLogicalClock.shared.now())], to: zone)
        try await opened.compact(zone)
        try await seed([Chore(id: "c9", title: "9")], into: writer)
        reader.releasePulls()

        try await waitUntil(mirror, "the reload") { Set($0.map(\.id)) == ["c0", "c3", "c9"] }
        #expect(reader.completeChangeSets >= 1)
        #expect(mirror.pendingChanges.isEmpty)
    }
}
