import Foundation
import MagicMirror
import Synchronization

/// Requirements 8 (notifications) and 10 (threads).
extension RecordDatabaseConformance {
    /// How long a check waits for a notification from another writer.
    static let notificationTimeout = Duration.seconds(30)

    static let notifications: [ConformanceCheck] = [
        ConformanceCheck("subscribers hear every commit of their zone", requirement: 8) { subject in
            let db = subject.database
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
            try expectEqual(afterCreate.count, 1, "notifications delivered before commit returned")
            try expectEqual(afterCreate.first?.reason, .created, "the reason")
            try expectEqual(afterCreate.first?.recordIDs, ["a"], "the record ids")
            try expectEqual(afterCreate.first?.token, created.token, "the token")
            try expectEqual(afterCreate.first?.zone, zone, "the zone")
            try expectEqual(afterCreate.first?.databaseIdentifier, db.identifier, "the database identifier")

            let mixed = try await db.commit([save("a", ["v": 2], base: 1), save("b", ["v": 1])], to: zone)
            let reasons = received.withLock { Array($0.dropFirst()) }
            try expectEqual(Set(reasons.map(\.reason)), [.updated, .created], "the reasons of a mixed commit")
            try expect(reasons.allSatisfy { $0.token == mixed.token }, "the tokens of a mixed commit: \(reasons)")
            try expectEqual(reasons.first { $0.reason == .updated }?.recordIDs, ["a"], "the updated ids")

            try await db.commit([.delete("b", baseVersion: 1, timestamp: now())], to: zone)
            try expectEqual(received.withLock { $0.last?.reason }, .deleted, "the reason of a deletion")

            subscription.cancel()
            try expect(subscription.isCancelled, "a cancelled subscription says it is not")
            let count = received.withLock { $0.count }
            try await db.commit([save("c", ["v": 1])], to: zone)
            try expectEqual(received.withLock { $0.count }, count, "notifications after cancelling")
            try expectEqual(otherZone.withLock { $0 }, 0, "notifications heard in another zone")
        },
        ConformanceCheck("subscribers hear other writers", requirement: 8) { subject in
            let db = subject.database
            let other = try await subject.otherWriter()
            try expect(other.writerID != db.writerID, "two writers share the writer id \(db.writerID)")
            try expectEqual(other.identifier, db.identifier, "the identifier seen by another writer")
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try db.subscribe(to: zone) { continuation.yield($0) }
            defer { subscription.cancel() }
            let outcome = try await other.commit([save("x", ["v": 1])], to: zone)
            let heard = try await stream.waitUntil(
                timeout: notificationTimeout, "a notification of the other writer's commit"
            ) { $0.recordIDs.contains("x") && $0.token >= outcome.token }
            try expectEqual(heard.reason, .created, "the reason")
            try expect(
                heard.writer == nil || heard.writer == other.writerID,
                "the writer is \(heard.writer ?? "nil"), not \(other.writerID)")
        },
        ConformanceCheck("a deallocated subscription stops", requirement: 8) { subject in
            let db = subject.database
            let count = Mutex(0)
            do {
                let subscription = try db.subscribe(to: zone) { _ in count.withLock { $0 += 1 } }
                try await db.commit([save("a", ["v": 1])], to: zone)
                _ = subscription
            }
            try await db.commit([save("b", ["v": 1])], to: zone)
            try expectEqual(count.withLock { $0 }, 1, "notifications heard")
        },
    ]

    static let threads: [ConformanceCheck] = [
        ConformanceCheck("concurrent commits from many tasks all land", requirement: 10) { subject in
            let db = subject.database
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for index in 0..<25 {
                            let outcome = try await db.commit([save("t\(task)-\(index)", ["i": index])], to: zone)
                            try expect(outcome.isApplied, "commit t\(task)-\(index) was not applied")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let all = try await db.fetchAll(in: zone)
            try expectEqual(all.records.count, 200, "the number of records")
            try expect(
                all.token.sequence >= 200 || all.token.generation > 0, "the token after 200 commits: \(all.token)")
        },
    ]
}
