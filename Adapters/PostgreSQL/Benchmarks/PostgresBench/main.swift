// mirror-bench-postgres: the PostgreSQL adapter's speed beside the server's own, measured in
// one run against one server (the root's mirror-bench cannot link postgres-nio).
//
//     Scripts/with-postgres.sh swift run -c release mirror-bench-postgres           # a table
//     Scripts/with-postgres.sh swift run -c release mirror-bench-postgres --quick --json
//     mirror-bench-postgres --url postgres://ROLE@HOST/DATABASE
//     mirror-bench-postgres --only commit           # one workload (and its baseline)
//
// Workloads, each against a fresh database of the server:
//   raw-insert   one-row INSERT round trips through postgres-nio (autocommit): the floor of a commit
//   commit       PostgreSQLDatabase.commit of one record (a transaction, its version check and NOTIFY)
//   raw-notify   NOTIFY on one connection to its arrival on a LISTEN connection: the floor of propagate
//   propagate    commit return in this process to the mirror's update in another process
//   asset        a 1 GiB file (16 MiB with --quick) stored as an asset and read back, with the peak memory
// `--json` prints one object per line in mirror-bench's shape (Measurement.swift, shared).
import Foundation
import Logging
import MagicMirror
import MagicMirrorPostgreSQL
import PostgresNIO
import Synchronization

signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--child-watch", arguments.count == 3, let expected = Int(arguments[2]) {
    do {
        try await PostgresBench.watch(url: arguments[1], expected: expected)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("mirror-bench-postgres --child-watch: \(error)\n".utf8))
        exit(1)
    }
}

var quick = false
var json = false
var url = ProcessInfo.processInfo.environment["MAGICMIRROR_POSTGRES_URL"]
var only: String?
var index = 0
while index < arguments.count {
    switch arguments[index] {
    case "--quick": quick = true
    case "--json": json = true
    case "--url" where index + 1 < arguments.count:
        index += 1
        url = arguments[index]
    case "--only" where index + 1 < arguments.count:
        index += 1
        only = arguments[index]
    case "--help", "-h":
        print("usage: mirror-bench-postgres [--quick] [--json] [--only WORKLOAD] [--url URL]  (default: $MAGICMIRROR_POSTGRES_URL)")
        exit(0)
    default:
        FileHandle.standardError.write(Data("mirror-bench-postgres: unknown argument \(arguments[index])\n".utf8))
        exit(2)
    }
    index += 1
}
guard let url else {
    FileHandle.standardError.write(Data(
        "mirror-bench-postgres: no server: pass --url or set MAGICMIRROR_POSTGRES_URL (or run under Scripts/with-postgres.sh)\n".utf8))
    exit(2)
}

let workloads = ["raw-insert", "commit", "raw-notify", "propagate", "asset"]
if let only, !workloads.contains(only) {
    FileHandle.standardError.write(Data(
        "mirror-bench-postgres: no workload \(only); there are \(workloads.joined(separator: ", "))\n".utf8))
    exit(2)
}
let count = quick ? 50 : 1_000
if !json {
    print("mirror-bench-postgres \(quick ? "(quick) " : "")on \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Date())")
}
do {
    let bench = PostgresBench(url: url)
    var results: [BenchResult] = []
    /// Whether to run `workload`: every one, or the one asked for and its baseline.
    func runs(_ workload: String, baselineOf: String? = nil) -> Bool {
        only == nil || only == workload || (baselineOf != nil && only == baselineOf)
    }
    if runs("raw-insert", baselineOf: "commit") || runs("commit") {
        let rawInsert = try await bench.rawInsert(count: count)
        results.append(rawInsert)
        if runs("commit") { results.append(try await bench.commit(count: count, baseline: rawInsert)) }
    }
    if runs("raw-notify", baselineOf: "propagate") || runs("propagate") {
        let rawNotify = try await bench.rawNotify(count: count)
        results.append(rawNotify)
        if runs("propagate") { results.append(try await bench.propagate(count: count, baseline: rawNotify)) }
    }
    if runs("asset") { results += try await bench.asset(mebibytes: quick ? 16 : 1_024) }
    if json {
        for result in results { print(Output.json(result)) }
    } else {
        print(Output.table(results))
    }
    exit(0)
} catch {
    FileHandle.standardError.write(Data("mirror-bench-postgres: \(error)\n".utf8))
    exit(1)
}
