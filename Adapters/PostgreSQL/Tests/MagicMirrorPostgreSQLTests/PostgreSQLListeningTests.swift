#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Synchronization
import Testing

/// `LISTEN`/`NOTIFY` as a hint: a lost connection, a dropped notification or a restarted
/// server is healed by pulling since the token after reconnecting, and the outage is
/// reported once.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLListeningTests {
    let zone = ZoneID.public("Todo")

    private func save(_ id: String) -> RecordOperation {
        .save(id, fields: Data(#"{"title":"\#(id)"}"#.utf8), baseVersion: 0, timestamp: .testNow())
    }

    /// While notifications arrive (a flood of `NOTIFY`s any role may send), work is not lent
    /// to the listening connection, where its answer would wait behind them, unless the
    /// lease waits for it; once they stop, it is lent again.
    @Test func workIsNotLentToTheListeningConnectionWhileNotificationsArrive() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let subscription = try database.subscribe(to: zone) { _ in }
            defer { subscription.cancel() }
            let listener = database.link.listener
            listener.busyInterval.withLock { $0 = .seconds(3600) }
            // Lent while no notification came (once the listening task's first pulls, which
            // may hold it, are done).
            let deadline = ContinuousClock.now + .seconds(60)
            var lent: Int?
            while lent == nil, ContinuousClock.now < deadline {
                lent = try await listener.withListeningConnection(wait: false) { _ in 1 }
                if lent == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(lent == 1)
            // Noise on the channel, heard.
            let before = database.listening.counts.received
            _ = try await TestServer.withAdmin(database: name) { client in
                try await client.query("SELECT pg_notify('magicmirror', 'noise')", logger: TestServer.logger)
            }
            while database.listening.counts.received == before, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(database.listening.counts.received > before)
            #expect(try await listener.withListeningConnection(wait: false) { _ in 1 } == nil)
            #expect(try await listener.withListeningConnection(wait: true) { _ in 2 } == 2)
            // The work goes to the pool meanwhile.
            _ = try await database.commit([save("during")], to: zone)
            listener.busyInterval.withLock { $0 = .zero }
            #expect(try await listener.withListeningConnection(wait: false) { _ in 3 } == 3)
        }
    }

    @Test func aDroppedNotificationIsHealedByPullingAfterReconnecting() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try database.subscribe(to: zone) { continuation.yield($0) }
            defer { subscription.cancel() }
            let recorder = ErrorNotificationRecorder { $0.message.contains(database.identifier) }
            defer { recorder.stop() }

            // Another writer's commit is heard through NOTIFY.
            let other = try await opened.open(TestServer.url(database: name))
            try await other.commit([save("heard")], to: zone)
            try await stream.waitUntil(timeout: .seconds(30), "the first commit") { $0.recordIDs.contains("heard") }

            // A change whose notification is lost: written behind the database's back, with no
            // NOTIFY; then the listening connection is cut.
            _ = try await TestServer.withAdmin(database: name) { client in
                try await TestServer.plant("silent", fields: #"{"title":"silent"}"#, recordType: "Todo", with: client)
                try await client.query(
                    """
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE datname = current_database() AND application_name = \(SharedListener.applicationName)
                    """, logger: TestServer.logger)
            }
            let healed = try await stream.waitUntil(timeout: .seconds(30), "the silent change") {
                $0.recordIDs.contains("silent")
            }
            #expect(healed.reason == .created)
            let errors = try await recorder.waitForErrors(count: 1, timeout: .seconds(30))
            #expect(errors.first?.kind == .unavailable)
            #expect(errors.first?.kind.isTransient == true)

            // Listening again: later commits are heard, and the outage was reported once.
            try await other.commit([save("after")], to: zone)
            try await stream.waitUntil(timeout: .seconds(30), "a commit after reconnecting") {
                $0.recordIDs.contains("after")
            }
            #expect(recorder.count == 1, "the outage was reported \(recorder.count) times")
        }
    }

    /// A listening backend that stops answering (SIGSTOP: its socket stays open, the kernel
    /// still acknowledges, nothing else comes) looks alive to TCP; only the check on the
    /// listening connection notices it. The database reports the outage once, listens on a
    /// new connection, and pulls what it missed meanwhile.
    @Test func aListeningBackendThatStopsAnsweringIsNoticedAndReplaced() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try database.subscribe(to: zone) { continuation.yield($0) }
            defer { subscription.cancel() }
            let recorder = ErrorNotificationRecorder { $0.message.contains(database.identifier) }
            defer { recorder.stop() }
            // Another process's writes: another endpoint (localhost, not 127.0.0.1), so not the
            // connections of `database`'s link, whose listening connection also serves its work.
            let other = try await opened.open(
                TestServer.url(database: name).replacingOccurrences(of: "127.0.0.1", with: "localhost"))
            try await other.commit([save("heard")], to: zone)
            try await stream.waitUntil(timeout: .seconds(30), "the first commit") { $0.recordIDs.contains("heard") }

            let stopped = try await listeningBackends(of: name)
            try #require(stopped.count == 1, "listening backends: \(stopped)")
            #expect(kill(pid_t(stopped[0]), SIGSTOP) == 0)
            defer { kill(pid_t(stopped[0]), SIGCONT) }

            // Committed while the listener hangs: its notification never reaches the client.
            try await other.commit([save("while-hung")], to: zone)
            let errors = try await recorder.waitForErrors(count: 1, timeout: .seconds(60))
            #expect(errors.first?.kind == .unavailable)
            #expect(errors.first?.message.contains("checking the listening connection") == true, "\(errors)")
            try await stream.waitUntil(timeout: .seconds(60), "the commit made while the listener hung") {
                $0.recordIDs.contains("while-hung")
            }
            // A new backend listens; later commits are heard, and the outage was reported once.
            let replacements = try await listeningBackends(of: name).filter { $0 != stopped[0] }
            #expect(replacements.count == 1, "listening backends besides the stopped one: \(replacements)")
            try await other.commit([save("after")], to: zone)
            try await stream.waitUntil(timeout: .seconds(30), "a commit after the listener was replaced") {
                $0.recordIDs.contains("after")
            }
            #expect(recorder.count == 1, "the outage was reported \(recorder.count) times: \(recorder.errors)")
        }
    }

    /// The server processes of database `name` whose session listens for this package.
    private func listeningBackends(of name: String) async throws -> [Int32] {
        try await TestServer.withAdmin(database: name) { client in
            var pids: [Int32] = []
            let rows = try await client.query(
                """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = \(SharedListener.applicationName)
                """, logger: TestServer.logger)
            for try await pid in rows.decode(Int32.self) { pids.append(pid) }
            return pids
        }
    }

    @Test func aRestartedServerLosesNoCommitAndSubscribersHearWhatFollows() async throws {
        try await OwnCluster.with { cluster in
            let opened = OpenedDatabases()
            let database = try await opened.open(cluster.url())
            let other = try await opened.open(cluster.url())
            defer { Task { for database in opened.all { await database.close() } } }
            let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
            let subscription = try database.subscribe(to: zone) { continuation.yield($0) }
            defer { subscription.cancel() }
            let recorder = ErrorNotificationRecorder { $0.message.contains(database.identifier) }
            defer { recorder.stop() }

            try await other.commit([save("before")], to: zone)
            try await stream.waitUntil(timeout: .seconds(30), "a commit before the restart") {
                $0.recordIDs.contains("before")
            }
            try await cluster.restart()
            try await commitRetrying([save("after-restart")], to: zone, on: other)
            try await stream.waitUntil(timeout: .seconds(30), "a commit after the restart") {
                $0.recordIDs.contains("after-restart")
            }

            try await cluster.kill()
            try await cluster.startAgain()
            try await commitRetrying([save("after-kill")], to: zone, on: other)
            try await stream.waitUntil(timeout: .seconds(30), "a commit after SIGKILL") {
                $0.recordIDs.contains("after-kill")
            }
            let stored = try await database.fetchAll(in: zone).records.map(\.id).sorted()
            #expect(stored == ["after-kill", "after-restart", "before"])
            #expect(recorder.count >= 1, "the outage was not reported")
        }
    }

    /// Commits, retrying transient failures (the server coming back) for up to 60 s.
    private func commitRetrying(
        _ operations: [RecordOperation], to zone: ZoneID, on database: PostgreSQLDatabase
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                let outcome = try await database.commit(operations, to: zone)
                #expect(outcome.isApplied)
                return
            } catch let error as MirrorError where error.kind.isTransient && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
