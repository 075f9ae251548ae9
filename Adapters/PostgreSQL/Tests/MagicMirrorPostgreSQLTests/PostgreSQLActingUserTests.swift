import Foundation
@_spi(Relay) @testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Synchronization
import Testing

/// What `mirror-relay` relies on: with a ``PostgreSQLActingUser`` set, each operation is one
/// transaction as that user, which nothing inside begins again (a `BEGIN` inside warns, and
/// cannot choose the isolation of a transaction that has run a statement).
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLActingUserTests {
    /// A zone of many pages read for a user is one snapshot: a commit made between two
    /// pages is not in the read, and the token says so.
    @Test func aReadOfManyPagesForAUserIsOneSnapshot() async throws {
        try await TestServer.withRoles(["alice"]) { roles in
            try await TestServer.withDatabase { name, opened in
                let alice = roles[0]
                let zone = ZoneID.private("Item", user: alice)
                // The relay's side: the administrator's connection (which makes the schema),
                // acting for alice.
                let relay = try await opened.open(TestServer.url(database: name))
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                for start in stride(from: 0, to: 60, by: 20) {
                    try await asAlice.commit(
                        (start..<start + 20).map {
                            .save(String(format: "r%03d", $0), fields: Data(#"{"v":\#($0)}"#.utf8),
                                  baseVersion: 0, timestamp: .testNow())
                        }, to: zone)
                }
                let pages = Mutex(0)
                relay.readPaging.withLock { paging in
                    paging.rows = 7
                    paging.afterPage = { number in
                        pages.withLock { $0 += 1 }
                        guard number == 2 else { return }
                        try await asAlice.commit(
                            [.save("late", fields: Data(#"{"v":0}"#.utf8), baseVersion: 0, timestamp: .testNow())],
                            to: zone)
                    }
                }
                let before = try await asAlice.currentToken(in: zone)
                // The relay runs a statement of its own first in each transaction (as it does
                // to record a commit's idempotency key): a transaction's isolation can only
                // be chosen before that.
                let acting = PostgreSQLActingUser(role: alice) { connection, logger in
                    _ = try await connection.query("SELECT count(*) FROM magicmirror.zones", logger: logger)
                }
                let read = try await PostgreSQLActingUser.$current.withValue(acting) {
                    try await relay.fetchAll(in: zone)
                }
                #expect(pages.withLock { $0 } > 60 / 7)
                #expect(read.records.count == 60)
                #expect(!read.records.contains { $0.id == "late" })
                #expect(read.token == before)
                let after = try await PostgreSQLActingUser.$current.withValue(acting) {
                    try await relay.changes(in: zone, since: read.token)
                }
                #expect(after.records.map(\.id) == ["late"])
            }
        }
    }
}
