import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Synchronization
import Testing

/// Many writers on one zone at once (schema version 7: a commit is one call of
/// `magicmirror.commit_records`, which waits for the zone's row instead of starting again):
/// every commit lands once, in one order every reader sees, and conflicts are decided as
/// before.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLCommitQueueTests {
    static let writers = 20

    /// `count` databases on one link whose pool has a connection for each, so that their
    /// commits reach the server at once.
    private static func databases(_ count: Int, name: String, opened: OpenedDatabases) async throws -> [PostgreSQLDatabase] {
        let first = try await PostgreSQLDatabase(
            url: TestServer.url(database: name), environment: [:], maximumConnections: count)
        opened.append(first)
        var databases = [first]
        for _ in 1..<count { databases.append(try await opened.open(TestServer.url(database: name))) }
        return databases
    }

    @Test func concurrentWritersOnOneZoneLandExactlyOnceInOneOrder() async throws {
        try await TestServer.withDatabase { name, opened in
            let databases = try await Self.databases(Self.writers, name: name, opened: opened)
            let zone = ZoneID.public(SampleRecord.recordType)
            let perWriter = 10
            // Mirrors that watch the zone from the start, on three of the writers' databases.
            var mirrors: [Mirror<SampleRecord>] = []
            for index in [0, 7, 19] { mirrors.append(try await Mirror<SampleRecord>(database: databases[index])) }
            let encoder = JSONEncoder()
            let committed = try await withThrowingTaskGroup(of: [(id: String, sequence: Int)].self) { group in
                for writer in 0..<Self.writers {
                    let database = databases[writer]
                    group.addTask {
                        var mine: [(id: String, sequence: Int)] = []
                        for index in 0..<perWriter {
                            let record = SampleRecord(title: "writer \(writer) commit \(index)")
                            let outcome = try await database.commit(
                                [.save(record.recordID, fields: try encoder.encode(record), baseVersion: 0,
                                       timestamp: .testNow())], to: zone)
                            #expect(outcome.isApplied)
                            mine.append((record.recordID, outcome.token.sequence))
                        }
                        // One writer's commits land in the order it made them.
                        #expect(mine.map(\.sequence) == mine.map(\.sequence).sorted())
                        return mine
                    }
                }
                var all: [(id: String, sequence: Int)] = []
                for try await mine in group { all += mine }
                return all
            }
            let total = Self.writers * perWriter
            // Each commit is one change of its own.
            #expect(Set(committed.map(\.sequence)).count == total)
            let (rows, distinct, last, stray) = try await TestServer.withAdmin(database: name) { client in
                (try await TestServer.count("SELECT count(*)::int8 FROM magicmirror.records", with: client),
                 try await TestServer.count("SELECT count(DISTINCT seq)::int8 FROM magicmirror.records", with: client),
                 try await TestServer.count(
                    "SELECT last_seq FROM magicmirror.zones WHERE record_type = \(SampleRecord.recordType)", with: client),
                 try await TestServer.count(
                    """
                    SELECT count(*)::int8 FROM magicmirror.records r JOIN magicmirror.zones z USING (zone_id)
                    WHERE r.seq > z.last_seq OR r.version <> 1
                    """, with: client))
            }
            #expect(rows == total)
            #expect(distinct == total)
            #expect(last == committed.map(\.sequence).max())
            #expect(stray == 0)
            // The order every reader sees: a pull from any commit's token brings exactly the
            // commits after it.
            let reader = databases[3]
            let bySequence = committed.sorted { $0.sequence < $1.sequence }
            for cut in [0, total / 3, total - 1] {
                let token = ChangeToken(generation: try await reader.currentToken(in: zone).generation,
                                        sequence: bySequence[cut].sequence)
                let pulled = try await reader.changes(in: zone, since: token)
                #expect(!pulled.isComplete)
                #expect(Set(pulled.records.map(\.id)) == Set(bySequence[(cut + 1)...].map(\.id)))
            }
            // Every mirror agrees.
            let expected = Set(committed.map(\.id))
            for mirror in mirrors {
                try await mirror.waitUntil(timeout: .seconds(60), "every commit") { $0.count == total }
                #expect(Set(mirror.dataModel.map(\.recordID)) == expected)
            }
        }
    }

    @Test func concurrentEditsOfOneRecordConflictAsBefore() async throws {
        try await TestServer.withDatabase { name, opened in
            let databases = try await Self.databases(Self.writers, name: name, opened: opened)
            let zone = ZoneID.public("Counter")
            func fields(_ value: Int) -> Data { Data(#"{"n":\#(value)}"#.utf8) }
            try await databases[0].commit([.save("counter", fields: fields(0), baseVersion: 0, timestamp: .testNow())], to: zone)

            // Every writer edits version 1 at once: one wins, every other is told the winner's
            // record, and nothing else is stored.
            let outcomes = try await withThrowingTaskGroup(of: CommitOutcome.self) { group in
                for writer in 0..<Self.writers {
                    let database = databases[writer]
                    group.addTask {
                        try await database.commit(
                            [.save("counter", fields: fields(100 + writer), baseVersion: 1, timestamp: .testNow())],
                            to: zone)
                    }
                }
                var outcomes: [CommitOutcome] = []
                for try await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            let winners = outcomes.filter(\.isApplied)
            #expect(winners.count == 1)
            guard case .applied(let won) = winners.first?.results.first else {
                Issue.record("no winner")
                return
            }
            #expect(won.version == 2)
            for outcome in outcomes where !outcome.isApplied {
                #expect(outcome.results == [.conflict(current: won)])
                // Refused after the winner landed: the token is the winner's.
                #expect(outcome.token == winners[0].token)
            }
            #expect(try await databases[1].fetch(["counter"], in: zone) == [won])

            // Every writer adds one, reading again after each conflict: all 20 land.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<Self.writers {
                    let database = databases[writer]
                    group.addTask {
                        while true {
                            let current = try #require(try await database.fetch(["counter"], in: zone).first)
                            let value = try #require(
                                (try JSONSerialization.jsonObject(with: current.fields ?? Data()) as? [String: Int])?["n"])
                            let outcome = try await database.commit(
                                [.save("counter", fields: fields(value + 1), baseVersion: current.version,
                                       timestamp: .testNow())], to: zone)
                            if outcome.isApplied { return }
                            guard case .conflict(let newer?) = outcome.results.first else {
                                Issue.record("a refused edit without the current record: \(outcome.results)")
                                return
                            }
                            #expect(newer.version > current.version)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let final = try #require(try await databases[2].fetch(["counter"], in: zone).first)
            #expect(final.version == 2 + Self.writers)
            #expect(final.fields == fields(100 + winnerIndex(won) + Self.writers))

            // A batch with one conflict stores nothing; a retry of a stored change stores
            // nothing again and answers the record as stored.
            let token = try await databases[0].currentToken(in: zone)
            let batch = try await databases[0].commit(
                [.save("other", fields: fields(1), baseVersion: 0, timestamp: .testNow()),
                 .save("counter", fields: fields(-1), baseVersion: 1, timestamp: .testNow())], to: zone)
            #expect(batch.results == [.notApplied, .conflict(current: final)])
            #expect(batch.token == token)
            #expect(try await databases[0].fetch(["other"], in: zone).isEmpty)
            let edit = RecordOperation.save("other", fields: fields(2), baseVersion: 0, timestamp: .testNow())
            let first = try await databases[0].commit([edit], to: zone)
            let again = try await databases[0].commit([edit], to: zone)
            #expect(again.results == first.results)
            #expect(again.token == first.token)
            // Another writer's identical operation is not a retry: it conflicts.
            let other = try await databases[1].commit([edit], to: zone)
            #expect(other.results == first.results.map { result in
                guard case .applied(let record) = result else { return result }
                return .conflict(current: record)
            })
        }
    }

    /// A commit reads the stored records of its batch by key, whatever plan its session made
    /// (schema version 10). On one connection a first commit to an empty zone makes the
    /// session's plan of `commit_records`, 2,000 records land, and a commit of one more then
    /// reads a handful of the zone's rows, where version 9's plan read all 2,001 at every
    /// commit (the batch joined to the zone's rows by the zone alone, then by id).
    @Test func aCommitReadsItsBatchByKeyNotTheWholeZone() async throws {
        try await TestServer.withDatabase { name, opened in
            let zone = ZoneID.public(SampleRecord.recordType)
            // Opening installs the schema; a first commit makes the zone.
            let database = try await opened.open(TestServer.url(database: name))
            _ = try await database.currentToken(in: zone)
            let read = try await TestServer.withAdmin(database: name) { client in
                try await client.withConnection { connection in
                    func commit(_ count: Int, from first: Int) async throws {
                        try await connection.query(
                            """
                            SELECT count(*)::int8 FROM magicmirror.commit_records('public', '', \(SampleRecord.recordType), 'w',
                                ARRAY(SELECT 'r' || g FROM generate_series(\(first), \(first + count - 1)) g),
                                array_fill(0::int8, ARRAY[\(count)::int4]),
                                array_fill(convert_to('{}', 'UTF8'), ARRAY[\(count)::int4]),
                                array_fill(false, ARRAY[\(count)::int4]),
                                array_fill((extract(epoch FROM now()) * 1000)::int8, ARRAY[\(count)::int4]),
                                ARRAY(SELECT g::int8 FROM generate_series(\(first), \(first + count - 1)) g))
                            """, logger: TestServer.logger)
                    }
                    try await commit(1, from: 0)
                    try await commit(2_000, from: 1)
                    try await connection.query("BEGIN", logger: TestServer.logger)
                    try await commit(1, from: 2_001)
                    var read = -1
                    let rows = try await connection.query(
                        """
                        SELECT (seq_tup_read + coalesce(idx_tup_fetch, 0))::int8 FROM pg_stat_xact_user_tables
                        WHERE relid = 'magicmirror.records'::regclass
                        """, logger: TestServer.logger)
                    for try await count in rows.decode(Int.self) { read = count }
                    try await connection.query("COMMIT", logger: TestServer.logger)
                    return read
                }
            }
            #expect(read >= 0, "the server counted the transaction's reads of magicmirror.records")
            #expect(read < 100, "a commit of one record read \(read) rows of its zone's 2,001")
            let stored = try await database.fetch(["r2001", "r1"], in: zone)
            #expect(stored.count == 2, "the commits landed")
        }
    }

    /// The writer whose edit of version 1 won, from the value it wrote (100 + its index).
    private func winnerIndex(_ record: StoredRecord) -> Int {
        let value = (try? JSONSerialization.jsonObject(with: record.fields ?? Data()) as? [String: Int])?["n"] ?? 100
        return value - 100
    }
}
