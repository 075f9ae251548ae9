// mirror-bench-postgres: the PostgreSQL adapter's speed beside the server's own, measured in
// one run against one server (the root's mirror-bench cannot link postgres-nio).
//
//     Scripts/with-postgres.sh swift run -c release mirror-bench-postgres           # a table
//     Scripts/with-postgres.sh swift run -c release mirror-bench-postgres --quick --json
//     mirror-bench-postgres --url postgres://ROLE@HOST/DATABASE
//     mirror-bench-postgres --only commit           # one workload (with its baseline)
//
// Workloads, each against a fresh database of the server:
//   raw-insert   one-row INSERT round trips through postgres-nio (autocommit): the floor of a commit
//   commit       PostgreSQLDatabase.commit of one record (a transaction, its version check and NOTIFY)
//   raw-notify   NOTIFY on one connection to its arrival on a LISTEN connection: the floor of propagate
//   propagate    commit return in this process to the mirror's update in another process
//   asset        a 1 GiB file (16 MiB with --quick) stored as an asset and read back, with the peak memory
//   shared-zone  1, 10 and 50 writers committing to one zone at once, beside as many clients doing
//                INSERT + NOTIFY in one statement through postgres-nio: one line per writer count
//   open-large   fetchAll of 1,000,000 records (--rows N; 20,000 with --quick) in a fresh process,
//                beside psql's COPY of the same rows and the JSON-file database's fetchAll (peak memory)
// The command line (`--quick`, `--json`, `--only`) and the `--json` shape are mirror-bench's
// (BenchCommand and BenchResult in Measurement.swift, shared).
import Foundation
import Logging
import MagicMirror
import MagicMirrorPostgreSQL
import PostgresNIO
import Synchronization

signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
await BenchCommand.runChild(program: "mirror-bench-postgres", arguments) { mode, rest in
    if mode == "--child-open-postgres" || mode == "--child-open-json" {
        try await PostgresBench.openChild(mode, rest)
        return
    }
    guard mode == "--child-watch", rest.count == 2, let expected = Int(rest[1]) else {
        throw BenchError("unknown child mode \(mode) \(rest)")
    }
    try await PostgresBench.watch(url: rest[0], expected: expected)
}

let command = BenchCommand(
    program: "mirror-bench-postgres", workloads: ["raw-insert", "commit", "raw-notify", "propagate", "asset", "shared-zone", "open-large"],
    options: [
        "url": "URL (default: $MAGICMIRROR_POSTGRES_URL)",
        "rows": "N (open-large's zone: 1,000,000 unless --quick)",
        "writers": "N,N (shared-zone's writer counts: 1,10,50)",
    ], arguments: arguments)
guard let url = command.values["url"] ?? ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_URL"] else {
    BenchCommand.fail(
        "mirror-bench-postgres",
        "no server: pass --url or set MAGICMIRROR_POSTGRES_URL (or run under Scripts/with-postgres.sh)")
}

let bench = PostgresBench(url: url)
let count = command.quick ? 50 : 1_000
/// The raw figures measured so far, the baselines of the workloads after them.
var baselines: [String: BenchResult] = [:]
/// A baseline workload's result: the one measured in this run, or measured now (and shown).
@MainActor func baseline(_ name: String, _ measure: () async throws -> BenchResult) async throws -> (BenchResult, [BenchResult]) {
    if let measured = baselines[name] { return (measured, []) }
    let measured = try await measure()
    baselines[name] = measured
    return (measured, [measured])
}
/// The results of workload `name`.
@MainActor func workload(_ name: String) async throws -> [BenchResult] {
    switch name {
    case "raw-insert":
        return try await baseline(name) { try await bench.rawInsert(count: count) }.1
    case "commit":
        let (base, shown) = try await baseline("raw-insert") { try await bench.rawInsert(count: count) }
        return shown + [try await bench.commit(count: count, baseline: base)]
    case "raw-notify":
        return try await baseline(name) { try await bench.rawNotify(count: count) }.1
    case "propagate":
        let (base, shown) = try await baseline("raw-notify") { try await bench.rawNotify(count: count) }
        return shown + [try await bench.propagate(count: count, baseline: base)]
    case "shared-zone":
        var results: [BenchResult] = []
        let counts = command.values["writers"].map { $0.split(separator: ",").compactMap { Int($0) } } ?? [1, 10, 50]
        for writers in counts {
            results.append(try await bench.sharedZone(
                writers: writers, total: command.quick ? 200 : 4_000, rounds: command.quick ? 2 : 8))
        }
        return results
    case "open-large":
        let rows = command.values["rows"].flatMap { Int($0) } ?? (command.quick ? 20_000 : 1_000_000)
        return [try await bench.openLarge(rows: rows)]
    default:
        return try await bench.asset(mebibytes: command.quick ? 16 : 1_024)
    }
}
await command.run { name in try await workload(name) }
