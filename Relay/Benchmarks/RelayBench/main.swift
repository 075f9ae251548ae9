import Foundation

// relay-bench: one mirror-relay process on a fresh database of the server
// MAGICMIRROR_POSTGRES_URL names (run it under Adapters/PostgreSQL/Scripts/with-postgres.sh),
// measured from this process; each workload (each fanout step) starts its own. See "The
// relay" in BENCHMARKS.md.
let command = BenchCommand(
    program: "relay-bench", workloads: ["idle-clients", "fanout", "commit"],
    options: ["clients": "N", "rate": "COMMITS_PER_SECOND", "watch": "stream|poll"],
    arguments: Array(CommandLine.arguments.dropFirst()))
// --clients N: idle-clients stops at N; fanout measures N clients only. --rate R: fanout's
// commits per second. --watch: the clients read streams (/v1/stream, the default) or long
// polls (/v1/watch).
let clients = command.values["clients"].map { text in
    guard let most = Int(text), most > 0 else { BenchCommand.fail("relay-bench", "--clients takes a positive number") }
    return most
}
let rate = command.values["rate"].map { text in
    guard let rate = Double(text), rate > 0 else { BenchCommand.fail("relay-bench", "--rate takes a positive number") }
    return rate
}
let streamed: Bool = switch command.values["watch"] ?? "stream" {
case "stream": true
case "poll": false
default: BenchCommand.fail("relay-bench", "--watch takes stream or poll")
}
let idleSteps = (command.quick ? IdleClients.quickSteps : IdleClients.steps).filter { $0 < clients ?? .max }
    + (clients.map { [$0] } ?? [])
let fanoutDefaults = command.quick ? Fanout.quickSteps : Fanout.steps
let fanoutSteps = (clients.map { [Fanout.Step(clients: $0, rate: fanoutDefaults[0].rate, seconds: fanoutDefaults[0].seconds)] }
    ?? fanoutDefaults).map { Fanout.Step(clients: $0.clients, rate: rate ?? $0.rate, seconds: $0.seconds) }
let signalSources = BenchCleanup.shared.handleSignals()
await command.run { name in
    switch name {
    case "idle-clients": return try await IdleClients.run(steps: idleSteps, streamed: streamed)
    case "fanout": return try await Fanout.run(steps: fanoutSteps, streamed: streamed)
    case "commit": return try await CommitLatency.run(commits: command.quick ? CommitLatency.quickCommits : CommitLatency.commits)
    default: return []
    }
}
