import Foundation
import MagicMirror
import Synchronization
import Testing

/// The implementation requirements of ``RecordDatabase``, checked on every implementation
/// the package ships (see `DatabaseFactory.all`). The numbers refer to the list in the
/// protocol's documentation.
@Suite struct RecordDatabaseConformanceTests {
    let zone = ZoneID.public("Todo")

    private func now() -> HLCTimestamp { HybridLogicalClock.shared.now() }

    private func save(_ id: String, _ object: [String: any Sendable], base: Int = 0) -> RecordOperation {
        .save(id, fields: fields(object), baseVersion: base, timestamp: now())
    }

    // 1. Names

    @Test(arguments: DatabaseFactory.all)
    func invalidNamesAreRefusedAndChangeNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let badNames = ["", ".", "..", "a/b", "../x", "/etc", "nul\0byte", String(repeating: "x", count: 256)]
        for bad in badNames {
            await #expect(throws: MirrorError.self) {
                try await db.commit([save("r1", ["a": 1])], to: .public(bad))
            }
            do {
                try await db.commit([save("r1", ["a": 1])], to: .private("Todo", user: bad))
                Issue.record("user name \(bad.debugDescription) was accepted")
            } catch let error as MirrorError {
                #expect(error.kind == .invalidName)
                #expect(error.message.contains("user name"))
            }
            do {
                try await db.commit([save(bad, ["a": 1])], to: zone)
                Issue.record("record id \(bad.debugDescription) was accepted")
            } catch let error as MirrorError {
                #expect(error.kind == .invalidName)
                #expect(error.message.contains("record id"))
            }
            await #expect(throws: MirrorError.self) { try await db.fetchAll(in: .public(bad)) }
            #expect(throws: MirrorError.self) { try db.subscribe(to: .public(bad)) { _ in } }
        }
        // A 255-byte name is the longest valid one.
        let longest = String(repeating: "y", count: 255)
        try await db.commit([save(longest, ["a": 1])], to: .public(longest))
        #expect(try await db.fetchAll(in: .public(longest)).records.map(\.id) == [longest])
        #expect(try await db.fetchAll(in: zone).records.isEmpty)
        #expect(try await db.currentToken(in: zone) == .initial)
    }

    // 2. Fields

    @Test(arguments: DatabaseFactory.all)
    func fieldsMustBeAJSONObjectAndComeBackAsSaved(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        for bad in ["[1,2]", "42", "\"text\"", "{\"a\":", "not json", "{\"a\":1} {\"b\":2}"] {
            do {
                try await db.commit(
                    [.save("r1", fields: Data(bad.utf8), baseVersion: 0, timestamp: now())], to: zone)
                Issue.record("fields \(bad) were accepted")
            } catch let error as MirrorError {
                #expect(error.kind == .invalidRecord)
                #expect(error.recordIDs == ["r1"])
            }
        }
        let exact = Data(#"{"title":"Milk \"2%\" ✓","n":1.5,"nested":{"z":[1,null,true]}}"#.utf8)
        try await db.commit([.save("r1", fields: exact, baseVersion: 0, timestamp: now())], to: zone)
        let fetched = try await db.fetch(["r1"], in: zone)
        #expect(fetched.map(\.fields) == [exact])
    }

    // 3. Versions

    @Test(arguments: DatabaseFactory.all)
    func versionsStartAtOneAndGrowWithEveryChange(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let first = try await db.commit([save("r1", ["v": 1])], to: zone)
        guard case .applied(let created) = first.results.first else {
            Issue.record("not applied: \(first)"); return
        }
        #expect(created.version == 1)
        #expect(created.writer == db.writerID)
        let second = try await db.commit([save("r1", ["v": 2], base: 1)], to: zone)
        #expect(second.isApplied)
        let afterEdit = try await db.fetch(["r1"], in: zone)
        #expect(afterEdit.map(\.version) == [2])
        let third = try await db.commit([.delete("r1", baseVersion: 2, timestamp: now())], to: zone)
        guard case .applied(let tombstone) = third.results.first else {
            Issue.record("not applied: \(third)"); return
        }
        #expect(tombstone.version == 3)
        #expect(tombstone.isDeleted)
        #expect(try await db.fetch(["r1"], in: zone).isEmpty)
        let changes = try await db.changes(in: zone, since: first.token)
        #expect(changes.records.map(\.version) == [3])
        #expect(changes.records.first?.isDeleted == true)
        // Re-creating a deleted record is based on the tombstone's version.
        let recreated = try await db.commit([save("r1", ["v": 4], base: 3)], to: zone)
        #expect(recreated.isApplied)
        #expect(try await db.fetch(["r1"], in: zone).map(\.version) == [4])
    }

    // 4. Conflicts and idempotency

    @Test(arguments: DatabaseFactory.all)
    func staleBaseVersionsConflictWithTheCurrentRecord(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let other = try await opened.otherWriter()
        try await db.commit([save("r1", ["v": 1])], to: zone)
        try await other.commit([save("r1", ["v": 2], base: 1)], to: zone)
        let stale = try await db.commit([save("r1", ["v": 3], base: 1)], to: zone)
        #expect(!stale.isApplied)
        guard case .conflict(let current?) = stale.results.first else {
            Issue.record("expected a conflict, got \(stale.results)"); return
        }
        #expect(current.version == 2)
        #expect(current.writer == other.writerID)
        #expect(object(current.fields)?["v"] as? Int == 2)
        // Creating a record that exists conflicts too.
        let duplicate = try await db.commit([save("r1", ["v": 9])], to: zone)
        #expect(!duplicate.isApplied)
        // A deleted record conflicts with an edit based on the version before the delete.
        try await other.commit([.delete("r1", baseVersion: 2, timestamp: now())], to: zone)
        let afterDelete = try await db.commit([save("r1", ["v": 4], base: 2)], to: zone)
        guard case .conflict(let tombstone?) = afterDelete.results.first else {
            Issue.record("expected a conflict with a tombstone, got \(afterDelete.results)"); return
        }
        #expect(tombstone.isDeleted)
        #expect(tombstone.version == 3)
    }

    @Test(arguments: DatabaseFactory.all)
    func retryingAStoredChangeIsNotAConflict(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let operation = save("r1", ["v": 1])
        let first = try await db.commit([operation], to: zone)
        let retry = try await db.commit([operation], to: zone)
        #expect(retry.isApplied)
        #expect(retry.results == first.results)
        #expect(retry.token == first.token, "a retry must not store the change twice")
        let changes = try await db.changes(in: zone, since: .initial)
        #expect(changes.records.count == 1)
    }

    @Test(arguments: DatabaseFactory.all)
    func deletingARecordThatNeverExistedLeavesATombstone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let outcome = try await db.commit([.delete("ghost", baseVersion: 0, timestamp: now())], to: zone)
        guard case .applied(let tombstone) = outcome.results.first else {
            Issue.record("not applied: \(outcome)"); return
        }
        #expect(tombstone.isDeleted)
        #expect(tombstone.version == 1)
        #expect(try await db.fetchAll(in: zone).records.isEmpty)
    }

    // 5. Atomicity

    @Test(arguments: DatabaseFactory.all)
    func aCommitWithOneConflictStoresNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        try await db.commit([save("existing", ["v": 1])], to: zone)
        let before = try await db.currentToken(in: zone)
        let outcome = try await db.commit(
            [save("new1", ["v": 1]), save("existing", ["v": 2], base: 7), save("new2", ["v": 1])], to: zone)
        #expect(!outcome.isApplied)
        #expect(outcome.results.count == 3)
        #expect(outcome.results[0] == .notApplied)
        #expect(outcome.results[2] == .notApplied)
        if case .conflict(let current?) = outcome.results[1] {
            #expect(current.version == 1)
        } else {
            Issue.record("expected a conflict, got \(outcome.results[1])")
        }
        #expect(try await db.currentToken(in: zone) == before)
        #expect(try await db.fetchAll(in: zone).records.map(\.id) == ["existing"])
    }

    @Test(arguments: DatabaseFactory.all)
    func aCommitNamingARecordTwiceIsRefused(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        await #expect(throws: MirrorError.self) {
            try await db.commit([save("r1", ["v": 1]), save("r1", ["v": 2])], to: zone)
        }
        #expect(try await db.fetchAll(in: zone).records.isEmpty)
    }

    @Test(arguments: DatabaseFactory.all)
    func aBatchIsCommittedWhole(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let operations = (0..<500).map { save("r\($0)", ["n": $0]) }
        let outcome = try await db.commit(operations, to: zone)
        #expect(outcome.isApplied)
        let all = try await db.fetchAll(in: zone)
        #expect(all.records.count == 500)
        #expect(Set(all.records.map(\.id)) == Set((0..<500).map { "r\($0)" }))
        #expect(all.token == outcome.token)
    }

    // 7. Tokens and change sets

    @Test(arguments: DatabaseFactory.all)
    func changesSinceATokenAreTheLatestStateOfEachChangedRecord(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        #expect(try await db.currentToken(in: zone) == .initial)
        let a = try await db.commit([save("a", ["v": 1]), save("b", ["v": 1])], to: zone)
        #expect(a.token > .initial)
        let b = try await db.commit([save("a", ["v": 2], base: 1)], to: zone)
        #expect(b.token > a.token)
        let c = try await db.commit([save("a", ["v": 3], base: 2), save("c", ["v": 1])], to: zone)
        #expect(try await db.currentToken(in: zone) == c.token)

        let sinceA = try await db.changes(in: zone, since: a.token)
        #expect(!sinceA.isComplete)
        #expect(sinceA.token == c.token)
        #expect(sinceA.records.map(\.id).sorted() == ["a", "c"])
        #expect(sinceA.records.first { $0.id == "a" }?.version == 3)

        let sinceLatest = try await db.changes(in: zone, since: c.token)
        #expect(sinceLatest.records.isEmpty)
        #expect(!sinceLatest.isComplete)

        let fromStart = try await db.changes(in: zone, since: .initial)
        #expect(fromStart.records.count == 3)
    }

    @Test(arguments: DatabaseFactory.all)
    func applyingChangeSetsReproducesTheZone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        var mirror: [String: StoredRecord] = [:]
        var token = ChangeToken.initial
        var versions: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<60 {
            let id = "r\(Int.random(in: 0..<8, using: &generator))"
            let base = versions[id] ?? 0
            let deleting = base > 0 && Bool.random(using: &generator)
            let operation: RecordOperation = deleting
                ? .delete(id, baseVersion: base, timestamp: now())
                : save(id, ["step": step], base: base)
            let outcome = try await db.commit([operation], to: zone)
            if case .applied(let record) = outcome.results[0] {
                versions[id] = record.version
            }
            if step % 7 == 0 {
                let changes = try await db.changes(in: zone, since: token)
                if changes.isComplete { mirror = [:] }
                for record in changes.records {
                    mirror[record.id] = record.isDeleted ? nil : record
                }
                token = changes.token
            }
        }
        let changes = try await db.changes(in: zone, since: token)
        for record in changes.records { mirror[record.id] = record.isDeleted ? nil : record }
        let all = try await db.fetchAll(in: zone)
        #expect(all.isComplete)
        #expect(Dictionary(uniqueKeysWithValues: all.records.map { ($0.id, $0) }) == mirror)
    }

    @Test(arguments: DatabaseFactory.all)
    func anOlderGenerationTokenGetsTheCompleteZone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let first = try await db.commit([save("keep", ["v": 1]), save("gone", ["v": 1])], to: zone)
        try await db.commit([.delete("gone", baseVersion: 1, timestamp: now())], to: zone)
        try await opened.compact(zone)
        let afterCompaction = try await db.currentToken(in: zone)
        #expect(afterCompaction.generation > first.token.generation)
        let changes = try await db.changes(in: zone, since: first.token)
        #expect(changes.isComplete)
        #expect(changes.records.map(\.id) == ["keep"])
        #expect(changes.token == afterCompaction)
        // A token from the future is treated the same way.
        let future = ChangeToken(generation: afterCompaction.generation, sequence: afterCompaction.sequence + 100)
        #expect(try await db.changes(in: zone, since: future).isComplete)
        // Writing continues in the new generation.
        let next = try await db.commit([save("new", ["v": 1])], to: zone)
        let incremental = try await db.changes(in: zone, since: afterCompaction)
        #expect(!incremental.isComplete)
        #expect(incremental.records.map(\.id) == ["new"])
        #expect(incremental.token == next.token)
    }

    // Zones are independent

    @Test(arguments: DatabaseFactory.all)
    func zonesAreIndependent(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        try await db.commit([save("p", ["v": 1])], to: .public("Todo"))
        try await db.commit([save("a", ["v": 1])], to: .private("Todo", user: "alice"))
        try await db.commit([save("b", ["v": 1])], to: .private("Todo", user: "bob"))
        try await db.commit([save("n", ["v": 1])], to: .public("Note"))
        #expect(try await db.fetchAll(in: .public("Todo")).records.map(\.id) == ["p"])
        #expect(try await db.fetchAll(in: .private("Todo", user: "alice")).records.map(\.id) == ["a"])
        #expect(try await db.fetchAll(in: .private("Todo", user: "bob")).records.map(\.id) == ["b"])
        #expect(try await db.fetchAll(in: .public("Note")).records.map(\.id) == ["n"])
        #expect(try await db.fetch(["p", "a"], in: .public("Todo")).map(\.id) == ["p"])
    }

    // 8. Notifications

    @Test(arguments: DatabaseFactory.all)
    func subscribersHearEveryCommitOfTheirZone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let received = Mutex<[RemoteNotification]>([])
        let subscription = try db.subscribe(to: zone) { notification in
            received.withLock { $0.append(notification) }
        }
        let otherZone = Mutex(0)
        let unrelated = try db.subscribe(to: .public("Other")) { _ in otherZone.withLock { $0 += 1 } }
        defer { unrelated.cancel() }

        let created = try await db.commit([save("a", ["v": 1])], to: zone)
        // Delivered before commit returns for this instance's own commits.
        let afterCreate = received.withLock { $0 }
        #expect(afterCreate.count == 1)
        #expect(afterCreate.first?.reason == .created)
        #expect(afterCreate.first?.recordIDs == ["a"])
        #expect(afterCreate.first?.token == created.token)
        #expect(afterCreate.first?.zone == zone)
        #expect(afterCreate.first?.databaseIdentifier == db.identifier)

        let mixed = try await db.commit(
            [save("a", ["v": 2], base: 1), save("b", ["v": 1])], to: zone)
        let reasons = received.withLock { Array($0.dropFirst()) }
        #expect(Set(reasons.map(\.reason)) == [.updated, .created])
        #expect(reasons.allSatisfy { $0.token == mixed.token })
        #expect(reasons.first { $0.reason == .updated }?.recordIDs == ["a"])

        try await db.commit([.delete("b", baseVersion: 1, timestamp: now())], to: zone)
        #expect(received.withLock { $0.last?.reason } == .deleted)

        subscription.cancel()
        #expect(subscription.isCancelled)
        let count = received.withLock { $0.count }
        try await db.commit([save("c", ["v": 1])], to: zone)
        #expect(received.withLock { $0.count } == count, "a cancelled subscription was called")
        #expect(otherZone.withLock { $0 } == 0, "a subscription heard another zone")
    }

    @Test(arguments: DatabaseFactory.all)
    func subscribersHearOtherWriters(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let other = try await opened.otherWriter()
        #expect(other.writerID != db.writerID)
        #expect(other.identifier == db.identifier)
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
        let subscription = try db.subscribe(to: zone) { continuation.yield($0) }
        defer { subscription.cancel() }
        let outcome = try await other.commit([save("x", ["v": 1])], to: zone)
        let heard = try await firstValue(of: stream, within: testTimeout) {
            $0.recordIDs.contains("x") && $0.token >= outcome.token
        }
        #expect(heard.reason == .created)
        #expect(heard.writer == nil || heard.writer == other.writerID)
    }

    @Test(arguments: DatabaseFactory.all)
    func aDeallocatedSubscriptionStops(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        let count = Mutex(0)
        do {
            let subscription = try db.subscribe(to: zone) { _ in count.withLock { $0 += 1 } }
            try await db.commit([save("a", ["v": 1])], to: zone)
            _ = subscription
        }
        try await db.commit([save("b", ["v": 1])], to: zone)
        #expect(count.withLock { $0 } == 1)
    }

    // 10. Threads

    @Test(arguments: DatabaseFactory.all)
    func concurrentCommitsFromManyTasksAllLand(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let db = opened.database
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<25 {
                        let outcome = try await db.commit(
                            [.save("t\(task)-\(index)", fields: fields(["i": index]), baseVersion: 0,
                                   timestamp: HybridLogicalClock.shared.now())], to: zone)
                        #expect(outcome.isApplied)
                    }
                }
            }
            try await group.waitForAll()
        }
        let all = try await db.fetchAll(in: zone)
        #expect(all.records.count == 200)
        #expect(all.token.sequence >= 200 || all.token.generation > 0)
    }
}

/// Waits for the first element of `stream` that satisfies `predicate`, failing after
/// `timeout`.
func firstValue<Element: Sendable>(
    of stream: AsyncStream<Element>, within timeout: Duration,
    where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw MirrorError(.timedOut, "no matching element within \(timeout)")
        }
        return value
    }
}
