import Foundation

// relay-bench: one mirror-relay process on a fresh database of the server
// MAGICMIRROR_POSTGRES_URL names (run it under Adapters/PostgreSQL/Scripts/with-postgres.sh),
// measured from this process. See "The relay" in BENCHMARKS.md.
let command = BenchCommand(
    program: "relay-bench", workloads: ["idle-clients"], options: ["clients": "N"],
    arguments: Array(CommandLine.arguments.dropFirst()))
let steps: [Int]
if let text = command.values["clients"] {
    guard let most = Int(text), most > 0 else { BenchCommand.fail("relay-bench", "--clients takes a positive number") }
    steps = (command.quick ? IdleClients.quickSteps : IdleClients.steps).filter { $0 < most } + [most]
} else {
    steps = command.quick ? IdleClients.quickSteps : IdleClients.steps
}
let signalSources = BenchCleanup.shared.handleSignals()
await command.run { name in
    switch name {
    case "idle-clients": return try await IdleClients.run(steps: steps)
    default: return []
    }
}
