import Foundation
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import Synchronization

/// `fanout`: the time from a commit to its hint at each of N clients that watch the zone,
/// at a given commit rate.
///
/// N clients (``WatchClient``s, 16 sessions per user, the relay's cap) long-poll one public
/// zone. Once every client has heard of a first, untimed commit, a writer (``RelayDatabase``,
/// through the same relay, as a user of its own) commits one new record per commit at the
/// step's rate: commit `n` (record `cn`) is sent at t0 + n / rate, each in a task of its
/// own, so that a slow commit does not delay the next. A pair's latency is from the moment
/// commit `n` was sent to the answer that first names record `cn` at a client (the relay
/// coalesces the hints queued between two polls of a client, at most
/// `RelayWire.maximumHintIDs` ids per hint). Pairs that never arrive are counted.
enum Fanout {
    /// One measurement: `clients` watching, commits at `rate` per second for `seconds`.
    struct Step: Sendable {
        var clients: Int
        var rate: Double
        var seconds: Double
    }

    /// The target's step last; 1,000 clients at 10 commits/s shows the fan-out with commits
    /// that do not queue.
    static let steps = [
        Step(clients: 100, rate: 100, seconds: 10), Step(clients: 1_000, rate: 10, seconds: 10),
        Step(clients: 1_000, rate: 100, seconds: 10),
    ]
    /// Small enough that a debug build on a crowded machine keeps up (CI runs it): 200
    /// clients at 50 commits/s took a minute there.
    static let quickSteps = [Step(clients: 100, rate: 20, seconds: 3)]
    /// The zone every client watches and the writer commits to.
    static let zone = ZoneID.public("BenchFanout")
    /// The first commit's record, which every client must hear of before the timed commits.
    static let warmUpID = "warm-up"
    /// How long the bench waits for every client to hear of the first commit.
    static let warmUpSeconds = 60.0
    /// How long the bench waits, after the last commit returned, for hints still on their way.
    static let drainSeconds = 10.0

    static func run(steps: [Step], streamed: Bool) async throws -> [BenchResult] {
        _ = BenchCleanup.raiseDescriptorLimit()
        var results: [BenchResult] = []
        for step in steps {
            results.append(try await BenchRelay.withFreshRelay { relay, run in try await measure(step, relay: relay, run: run, streamed: streamed) })
        }
        return results
    }

    private static func measure(_ step: Step, relay: BenchRelay, run: String, streamed: Bool) async throws -> BenchResult {
        let names = BenchUsers.names(run: run, clients: step.clients)
        let writerName = "\(run)_writer"
        BenchCleanup.shared.addRoles([writerName])
        let tokens = try await BenchUsers.tokens(for: names + [writerName])
        let writerToken = tokens[names.count]
        let relayURL = URL(string: "http://127.0.0.1:\(relay.port)")!
        let writer = RelayDatabase(url: relayURL, user: try MirrorUser(name: writerName)) { writerToken }
        // Each user's first request provisions its role: one user at a time, before the
        // clients (first polls of new users at once have been refused under load: see the
        // relay's section of BENCHMARKS.md).
        for (name, token) in zip(names + [writerName], tokens) {
            _ = try await RelayDatabase(url: relayURL, user: try MirrorUser(name: name)) { token }.currentToken(in: zone)
        }
        let commits = max(1, Int((step.rate * step.seconds).rounded()))
        let board = FanoutBoard(clients: step.clients, commits: commits)
        return try await WatchClients.with(board: board, streamed: streamed) { pool in
            let specs = (0..<step.clients).map { ClientSpec(index: $0, run: run, port: relay.port, tokens: tokens, zone: zone) }
            if let failure = await pool.connect(specs, port: relay.port) { throw BenchFailure(failure) }
            try await warmUp(step, writer: writer, board: board)
            board.startCommits()
            let activity = await BenchServer.activity(in: run)
            let use = ProcessorUse(relay: relay, backends: activity.backends)
            let start = monotonicSeconds()
            let lateness = await commit(commits, rate: step.rate, writer: writer, board: board)
            let committed = monotonicSeconds()
            let used = use.sinceStart()
            // Hints still on their way.
            let expected = step.clients * board.counts.applied
            while board.counts.arrived < expected, board.counts.failures == 0, monotonicSeconds() < committed + drainSeconds {
                try await Task.sleep(for: .milliseconds(50))
            }
            let report = board.report()
            if let failure = report.counts.firstFailure { throw BenchFailure("fanout: \(failure)") }
            let transactions = await BenchServer.activity(in: run).transactions
            return result(
                step, users: names.count, commits: commits, report: report, seconds: committed - start,
                lateness: lateness, processors: used, streamed: streamed,
                transactions: transactions.flatMap { after in activity.transactions.map { after - $0 } })
        }
    }

    /// Commits the first record and waits until every client has heard of it: every
    /// client's zone is registered and its long poll going.
    private static func warmUp(_ step: Step, writer: RelayDatabase, board: FanoutBoard) async throws {
        try await writer.commit([save(warmUpID)], to: zone)
        let deadline = monotonicSeconds() + warmUpSeconds
        while board.counts.warm < step.clients, board.counts.failures == 0, monotonicSeconds() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let counts = board.counts
        if let failure = counts.firstFailure { throw BenchFailure("fanout, warming up: \(failure)") }
        guard counts.warm == step.clients else {
            throw BenchFailure("fanout: \(step.clients - counts.warm) clients had not heard of the first commit after \(warmUpSeconds) s")
        }
    }

    /// A save of a new record `id`, whose one field is its id.
    private static func save(_ id: String) -> RecordOperation {
        .save(
            id, fields: Data("{\"n\":\"\(id)\"}".utf8), baseVersion: 0,
            timestamp: HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000)))
    }

    /// Sends `commits` commits on schedule, each in a task of its own, and waits for them all;
    /// returns how late the latest send was behind its schedule, in seconds.
    private static func commit(_ commits: Int, rate: Double, writer: RelayDatabase, board: FanoutBoard) async -> Double {
        let start = monotonicSeconds() + 0.01
        var lateness = 0.0
        await withTaskGroup(of: Void.self) { group in
            for n in 0..<commits {
                let due = start + Double(n) / rate
                let wait = due - monotonicSeconds()
                if wait > 0 { try? await Task.sleep(for: .seconds(wait)) }
                lateness = max(lateness, monotonicSeconds() - due)
                group.addTask {
                    let operation = save("c\(n)")
                    let sentAt = board.sending(n)
                    do {
                        let outcome = try await writer.commit([operation], to: zone)
                        board.committed(n, seconds: monotonicSeconds() - sentAt, applied: outcome.isApplied)
                    } catch {
                        board.commitFailed(n, "\(error)")
                    }
                }
            }
            await group.waitForAll()
        }
        return lateness
    }

    private static func result(
        _ step: Step, users: Int, commits: Int, report: FanoutBoard.Report, seconds: Double, lateness: Double,
        processors: ProcessorUse.Used, streamed: Bool, transactions: Int?
    ) -> BenchResult {
        let counts = report.counts
        let sorted = report.latencies
        let missing = max(0, step.clients * counts.applied - counts.arrived)
        let isTarget = step.clients >= 1_000 && step.rate >= 100
        let p99 = percentile(sorted, 0.99) * 1000
        func cores(_ used: Double?) -> String { used.map { String(format: "%.2f", $0 / seconds) } ?? "?" }
        var note = "\(step.clients) clients of \(users) users (\(BenchUsers.maximumSessionsPerUser) sessions each) "
            + (streamed ? "reading streams (/v1/stream) of" : "long-polling (/v1/watch)") + " one public zone; \(commits) commits of one new record each through RelayDatabase (one "
            + String(
                format: "writer, a task per commit) scheduled at %.0f/s, sent at %.1f/s (at most %.1f ms late), "
                    + "the last returned %.1f s after the first was sent (%.1f commits/s); a commit took p50 %.1f / "
                    + "p99 %.1f ms to return; the first client to hear a commit heard it p50 %.1f / p99 %.1f ms after "
                    + "its send; latency from a commit's send to the first answer "
                    + "naming its record, over %ld (client, commit) pairs; %ld pairs never arrived (within %.0f s of the "
                    + "last commit), %ld commits failed or were not applied, %ld hints were cut at %ld ids; each client "
                    + "was answered %.1f times a second, %.1f ids per answer; %ld polls were answered 503 (try again) "
                    + "and sent again; ",
                step.rate, report.sendRate, lateness * 1000, seconds, Double(commits) / seconds, percentile(report.commitSeconds, 0.5) * 1000,
                percentile(report.commitSeconds, 0.99) * 1000, percentile(report.firstHeard, 0.5) * 1000,
                percentile(report.firstHeard, 0.99) * 1000, sorted.count, missing, drainSeconds,
                commits - counts.applied, counts.cutHints, RelayWire.maximumHintIDs,
                Double(counts.answers) / Double(step.clients) / seconds,
                Double(counts.ids) / Double(max(1, counts.answers)), counts.retries)
            + "processor during the commits, in cores: relay \(cores(processors.relay)), PostgreSQL's sessions on "
            + "the relay's database \(cores(processors.server)), this bench (clients and writer) "
            + "\(cores(processors.bench)), the whole machine \(cores(processors.machine)) of "
            + "\(ProcessInfo.processInfo.activeProcessorCount); PostgreSQL counted about "
            + (transactions.map { String(format: "%.1f", Double($0) / Double(commits)) } ?? "?")
            + " transactions in the relay's database per commit (its statistics lag by a second or so). The load "
            + "generator shares the machine's cores with the relay and PostgreSQL."
        if let failure = counts.firstCommitFailure { note += " First commit failure: \(failure)" }
        return BenchResult(
            name: "fanout", variant: String(format: "%ld clients, %.0f commits/s, ", step.clients, step.rate) + (streamed ? "streams" : "long polls"),
            n: sorted.count, seconds: seconds, baseline: "none (absolute figure)",
            target: isTarget ? "p99 ≤ 50 ms to 1,000 clients at 100 commits/s" : nil,
            meetsTarget: isTarget ? p99 <= 50 && missing == 0 && counts.applied == commits : nil,
            p50Millis: percentile(sorted, 0.5) * 1000, p99Millis: p99, maxMillis: sorted.last.map { $0 * 1000 },
            note: note, commitsPerSecond: report.sendRate, clients: step.clients)
    }
}

/// What the clients and the writer of `fanout` saw. Every field is behind the one mutex; the
/// clients' event loops and the writer's tasks write it, the bench's task reads it.
final class FanoutBoard: WatchBoard {
    /// Counters.
    struct Counts {
        /// Clients that heard of the first commit.
        var warm = 0
        /// (client, commit) pairs heard of.
        var arrived = 0
        /// Commits applied.
        var applied = 0
        /// Answers and the record ids they carried, since the timed commits began.
        var answers = 0
        var ids = 0
        /// Hints that carried `RelayWire.maximumHintIDs` ids: perhaps cut.
        var cutHints = 0
        /// Polls answered 503 and sent again.
        var retries = 0
        var failures = 0
        var firstFailure: String?
        var firstCommitFailure: String?
    }

    /// The figures at the end.
    struct Report {
        var counts: Counts
        /// Every pair's latency, sorted, in seconds.
        var latencies: [Double]
        /// The commits' durations, sorted, in seconds.
        var commitSeconds: [Double]
        /// Per commit heard by any client, the latency of the first client that heard it,
        /// sorted, in seconds: the way to the relay's fan-out, without the fan-out's spread.
        var firstHeard: [Double]
        /// Commits sent per second, from the first send to the last.
        var sendRate: Double
    }

    private struct State {
        var counts = Counts()
        var warm: [Bool]
        /// When commit `n` was sent (monotonic seconds); NaN until then.
        var sent: [Double]
        var commitSeconds: [Double] = []
        /// The latency of client `c` and commit `n` at `c * commits + n`; NaN until heard.
        var latencies: [Double]
        var counting = false
        var stopping = false
    }

    private let commits: Int
    private let state: Mutex<State>

    init(clients: Int, commits: Int) {
        self.commits = commits
        state = Mutex(
            State(
                warm: Array(repeating: false, count: clients), sent: Array(repeating: .nan, count: commits),
                latencies: Array(repeating: .nan, count: clients * commits)))
    }

    var counts: Counts { state.withLock { $0.counts } }

    /// From now on, answers are counted.
    func startCommits() { state.withLock { $0.counting = true } }

    /// Commit `n` is being sent: returns the time, which it keeps.
    func sending(_ n: Int) -> Double {
        let now = monotonicSeconds()
        state.withLock { $0.sent[n] = now }
        return now
    }

    func committed(_ n: Int, seconds: Double, applied: Bool) {
        state.withLock { state in
            state.commitSeconds.append(seconds)
            if applied { state.counts.applied += 1 }
            else { state.counts.firstCommitFailure = state.counts.firstCommitFailure ?? "commit \(n) was not applied" }
        }
    }

    func commitFailed(_ n: Int, _ reason: String) {
        state.withLock { $0.counts.firstCommitFailure = $0.counts.firstCommitFailure ?? "commit \(n): \(reason)" }
    }

    func answered(_ index: Int, sentAt: Double, answeredAt: Double, hints: [RemoteNotification]) {
        var heard: [Int] = []
        var warm = false
        var ids = 0, cut = 0
        for hint in hints {
            ids += hint.recordIDs.count
            if hint.recordIDs.count >= RelayWire.maximumHintIDs { cut += 1 }
            for id in hint.recordIDs {
                if id == Fanout.warmUpID {
                    warm = true
                } else if id.first == "c", let n = Int(id.dropFirst()), (0..<commits).contains(n) {
                    heard.append(n)
                }
            }
        }
        state.withLock { state in
            if warm, !state.warm[index] {
                state.warm[index] = true
                state.counts.warm += 1
            }
            guard state.counting else { return }
            state.counts.answers += 1
            state.counts.ids += ids
            state.counts.cutHints += cut
            for n in heard where state.latencies[index * commits + n].isNaN && !state.sent[n].isNaN {
                state.latencies[index * commits + n] = answeredAt - state.sent[n]
                state.counts.arrived += 1
            }
        }
    }

    func failed(_ index: Int, _ reason: String) {
        state.withLock { state in
            guard !state.stopping else { return }
            state.counts.failures += 1
            state.counts.firstFailure = state.counts.firstFailure ?? "client \(index + 1): \(reason)"
        }
    }

    func toldToRetry(_ index: Int) { state.withLock { $0.counts.retries += 1 } }

    func stop() { state.withLock { $0.stopping = true } }

    /// The figures so far.
    func report() -> Report {
        state.withLock { state in
            let sent = state.sent.filter { !$0.isNaN }
            let span = (sent.max() ?? 0) - (sent.min() ?? 0)
            let (clients, commits) = (state.warm.count, self.commits)
            let latencies = state.latencies
            let firstHeard = (0..<commits).compactMap { n in
                (0..<clients).lazy.map { latencies[$0 * commits + n] }.filter { !$0.isNaN }.min()
            }
            return Report(
                counts: state.counts, latencies: state.latencies.filter { !$0.isNaN }.sorted(),
                commitSeconds: state.commitSeconds.sorted(), firstHeard: firstHeard.sorted(),
                sendRate: span > 0 ? Double(sent.count - 1) / span : .nan)
        }
    }
}
