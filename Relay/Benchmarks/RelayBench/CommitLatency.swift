import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import MagicMirrorRelay
import PostgresNIO

/// `commit`: one writer's commit latency through the relay, beside the same commit straight
/// to PostgreSQL, and beside the least a commit can be.
///
/// One writer commits one new small record at a time, and waits for each, in three ways:
/// - `relay`: ``RelayDatabase`` over HTTP to `mirror-relay`, which commits as the token's
///   user on its pool (row-level security for that user);
/// - `direct`: `PostgreSQLDatabase` on the same server, as a plain login role of its own
///   (row-level security for that role);
/// - `raw`: one statement through postgres-nio, as that role, that inserts a row into a
///   table of its own and sends a `NOTIFY`: one round trip, one transaction.
///
/// The ways alternate in rounds, in an order that rotates, so that the machine's noise
/// falls on all three; a few commits of each come first, untimed. `ratio` is the relay's
/// p50 over the direct p50.
enum CommitLatency {
    /// Commits per way.
    static let commits = 500
    static let quickCommits = 100
    /// Rounds the commits of each way are split into.
    static let rounds = 10
    /// Untimed commits of each way, before the rounds.
    static let warmUp = 20

    /// The three ways to commit, in the order of the first round.
    enum Way: CaseIterable { case relay, direct, raw }

    static func run(commits: Int) async throws -> [BenchResult] {
        try await BenchRelay.withFreshRelay { relay, run in
            let writerName = "\(run)_writer", role = "\(run)_direct"
            BenchCleanup.shared.addRoles([writerName, role])
            try await BenchServer.admin("CREATE ROLE \"\(role)\" LOGIN")
            try await BenchServer.admin("CREATE TABLE relay_bench_raw (n bigint PRIMARY KEY, body text NOT NULL)", database: run)
            try await BenchServer.admin("GRANT INSERT, SELECT ON relay_bench_raw TO \"\(role)\"", database: run)
            let token = try await BenchUsers.tokens(for: [writerName])[0]
            let relayDatabase = RelayDatabase(
                url: URL(string: "http://127.0.0.1:\(relay.port)")!, user: try MirrorUser(name: writerName)) { token }
            let direct = try await PostgreSQLDatabase(url: try BenchServer.url(database: run, role: role))
            let raw = PostgresClient(
                configuration: try BenchServer.configuration(database: run, role: role), backgroundLogger: BenchServer.logger)
            let rawRun = Task { await raw.run() }
            defer { rawRun.cancel() }
            let writers = Writers(relay: relayDatabase, direct: direct, raw: raw)
            do {
                let result = try await measure(commits: commits, writers: writers, relay: relay)
                await direct.close()
                return [result]
            } catch {
                await direct.close()
                throw error
            }
        }
    }

    /// The three writers, and the next record number of each way.
    private struct Writers {
        let relay: RelayDatabase
        let direct: PostgreSQLDatabase
        let raw: PostgresClient
        var next: [Way: Int] = [:]

        /// Commits the next record of `way`; returns how long it took, in seconds.
        mutating func commit(_ way: Way) async throws -> Double {
            let n = next[way, default: 0]
            next[way] = n + 1
            let id = "r\(n)"
            let body = "{\"n\":\(n)}"
            let operation = RecordOperation.save(
                id, fields: Data(body.utf8), baseVersion: 0,
                timestamp: HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000)))
            let start = monotonicSeconds()
            switch way {
            case .relay:
                guard try await relay.commit([operation], to: .public("BenchRelayCommit")).isApplied else {
                    throw BenchFailure("commit: the relay did not apply \(id)")
                }
            case .direct:
                guard try await direct.commit([operation], to: .public("BenchDirectCommit")).isApplied else {
                    throw BenchFailure("commit: PostgreSQLDatabase did not apply \(id)")
                }
            case .raw:
                let rows = try await raw.query(
                    """
                    WITH inserted AS (INSERT INTO relay_bench_raw (n, body) VALUES (\(n), \(body)) RETURNING n)
                    SELECT pg_notify('relay_bench', n::text) FROM inserted
                    """, logger: BenchServer.logger)
                for try await _ in rows {}
            }
            return monotonicSeconds() - start
        }
    }

    private static func measure(commits: Int, writers: Writers, relay: BenchRelay) async throws -> BenchResult {
        var writers = writers
        for way in Way.allCases {
            for _ in 0..<warmUp { _ = try await writers.commit(way) }
        }
        var seconds: [Way: [Double]] = [:]
        var relayProcessor = 0.0
        let perRound = max(1, commits / rounds)
        for round in 0..<(commits + perRound - 1) / perRound {
            let count = min(perRound, commits - round * perRound)
            let order = Way.allCases.indices.map { Way.allCases[($0 + round) % Way.allCases.count] }
            for way in order {
                let before = relay.cpuSeconds
                for _ in 0..<count { seconds[way, default: []].append(try await writers.commit(way)) }
                if way == .relay, let before, let after = relay.cpuSeconds { relayProcessor += after - before }
            }
        }
        let sorted = seconds.mapValues { $0.sorted() }
        func p50(_ way: Way) -> Double { percentile(sorted[way] ?? [], 0.5) * 1000 }
        func p99(_ way: Way) -> Double { percentile(sorted[way] ?? [], 0.99) * 1000 }
        let ratio = p50(.relay) / p50(.direct)
        let note = String(
            format: "one writer, sequential: %ld commits of one new record (a JSON object of about 10 bytes) per way, to a "
                + "public zone, in %ld rounds whose order rotates, after %ld untimed; relay: RelayDatabase (URLSession, "
                + "HTTP/1.1 on loopback) to mirror-relay, which commits as the user on its pool; direct: "
                + "PostgreSQLDatabase as a plain login role, p50 %.2f / p99 %.2f ms; raw: INSERT+NOTIFY in one "
                + "statement through postgres-nio, same role, p50 %.2f / p99 %.2f ms; relay p99 %.2f× direct p99; "
                + "the relay's processor time per relay commit %.0f µs; client, relay and PostgreSQL share the "
                + "machine's cores",
            commits, (commits + perRound - 1) / perRound, warmUp, p50(.direct), p99(.direct), p50(.raw), p99(.raw),
            p99(.relay) / p99(.direct), relayProcessor / Double(commits) * 1e6)
        var result = BenchResult(
            name: "commit", variant: "relay", n: commits, seconds: (seconds[.relay] ?? []).reduce(0, +),
            baseline: "PostgreSQLDatabase direct, p50", baselineFigure: p50(.direct), baselineUnit: "ms", ratio: ratio,
            target: "relay p50 ≤ 1.5× direct p50", meetsTarget: ratio <= 1.5,
            p50Millis: p50(.relay), p99Millis: p99(.relay), maxMillis: (sorted[.relay]?.last ?? .nan) * 1000,
            note: note)
        result.rawP50Millis = p50(.raw)
        result.rawP99Millis = p99(.raw)
        return result
    }
}
