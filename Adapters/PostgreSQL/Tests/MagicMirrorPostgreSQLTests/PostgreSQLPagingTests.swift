import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Synchronization
import Testing

/// A zone larger than one page (schema version 7): read in pages of one snapshot, each with
/// a deadline of its own, in the order of the records' last change. The tests make pages of
/// a few records (`readPaging`).
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLPagingTests {
    let zone = ZoneID.public("Item")

    private static func save(_ id: String, _ value: Int, base: Int = 0) -> RecordOperation {
        .save(id, fields: Data(#"{"v":\#(value)}"#.utf8), baseVersion: base, timestamp: .testNow())
    }

    /// The ids of the zone's records as the server orders them (superuser), live only or all.
    private static func serverOrder(database name: String, since: Int = -1, liveOnly: Bool) async throws -> [String] {
        try await TestServer.withAdmin(database: name) { client in
            var ids: [String] = []
            for try await id in try await client.query(
                """
                SELECT id FROM magicmirror.records
                WHERE seq > \(since) AND (fields IS NOT NULL OR NOT \(liveOnly))
                ORDER BY seq, id
                """, logger: TestServer.logger
            ).decode(String.self) { ids.append(id) }
            return ids
        }
    }

    @Test func aZoneLargerThanAPageOpensCompletelyAndInOrder() async throws {
        try await TestServer.withDatabase { name, opened in
            let writer = try await opened.open(TestServer.url(database: name))
            let reader = try await opened.open(TestServer.url(database: name))
            let pages = Mutex<[Int]>([])
            reader.readPaging.withLock { paging in
                paging.rows = 7
                paging.afterPage = { number in pages.withLock { $0.append(number) } }
            }
            // 120 records in commits of various sizes (a commit's records share a sequence
            // number, so pages cut inside a commit too), then edits and deletes.
            var index = 0
            for size in [1, 30, 2, 50, 3, 34] {
                try await writer.commit((index..<index + size).map { Self.save(String(format: "r%03d", $0), $0) }, to: zone)
                index += size
            }
            let middle = try await writer.currentToken(in: zone)
            try await writer.commit([Self.save("r005", 1005, base: 1), Self.save("r077", 1077, base: 1)], to: zone)
            try await writer.commit((40..<60).map { .delete(String(format: "r%03d", $0), baseVersion: 1, timestamp: .testNow()) }, to: zone)

            let all = try await reader.fetchAll(in: zone)
            #expect(all.isComplete)
            #expect(all.records.map(\.id) == (try await Self.serverOrder(database: name, liveOnly: true)))
            #expect(all.records.count == 100)
            #expect(all.token == (try await writer.currentToken(in: zone)))
            #expect(pages.withLock { $0 }.count >= 100 / 7)
            #expect(all.records.first { $0.id == "r005" }?.fields == Data(#"{"v":1005}"#.utf8))

            // Since a token: every change after it, tombstones too, in pages.
            pages.withLock { $0 = [] }
            let since = try await reader.changes(in: zone, since: middle)
            #expect(!since.isComplete)
            #expect(since.records.map(\.id)
                    == (try await Self.serverOrder(database: name, since: middle.sequence, liveOnly: false)))
            #expect(since.records.count == 22)
            #expect(pages.withLock { $0 }.count >= 22 / 7)

            // A commit made while the pages are read is not in them: the read is one
            // snapshot, and its token says so (the next pull brings the commit).
            let late = Mutex(false)
            reader.readPaging.withLock { paging in
                paging.afterPage = { number in
                    guard number == 2, !late.withLock({ $0 }) else { return }
                    late.withLock { $0 = true }
                    try await writer.commit([Self.save("late", 1)], to: zone)
                }
            }
            let before = try await reader.fetchAll(in: zone)
            #expect(late.withLock { $0 })
            #expect(before.records.map(\.id) == all.records.map(\.id))
            #expect(before.token == all.token)
            let after = try await reader.changes(in: zone, since: before.token)
            #expect(after.records.map(\.id) == ["late"])
        }
    }

    /// Each page has the deadline, not the zone: pages that each come in time read a zone
    /// that takes longer than the deadline in all; one page late fails with `timedOut`.
    @Test func aPagesDeadlineNotTheZonesApplies() async throws {
        try await TestServer.withDatabase { name, opened in
            let writer = try await opened.open(TestServer.url(database: name))
            try await writer.commit((0..<60).map { Self.save("r\($0)", $0) }, to: zone)
            let reader = try await opened.open(TestServer.url(database: name))
            // Generous: a page's own read must fit in the deadline beside the pause on a
            // loaded machine (2 s with 300 ms pauses failed once while the suite ran).
            let deadline = Duration.seconds(6)
            let started = ContinuousClock.now
            reader.readPaging.withLock { paging in
                paging.rows = 4
                paging.deadline = deadline
                // 16 pages, each well within the deadline, together longer than it.
                paging.afterPage = { _ in try await Task.sleep(for: .milliseconds(500)) }
            }
            let all = try await reader.fetchAll(in: zone)
            #expect(all.records.count == 60)
            #expect(ContinuousClock.now - started > deadline, "the read was quicker than one deadline: nothing shown")

            reader.readPaging.withLock { paging in
                paging.afterPage = { number in
                    if number == 3 { try await Task.sleep(for: .seconds(30)) }
                }
            }
            let late = await #expect(throws: MirrorError.self) { _ = try await reader.fetchAll(in: zone) }
            #expect(late?.kind == .timedOut)
            // The database reads normally afterwards.
            reader.readPaging.withLock { $0.afterPage = nil }
            #expect(try await reader.fetchAll(in: zone).records.count == 60)
        }
    }
}
