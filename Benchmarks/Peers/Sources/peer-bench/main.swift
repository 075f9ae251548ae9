// peer-bench: MagicMirror beside GRDB (SQLite), the same workloads in one run.
//
//     swift run -c release --package-path Benchmarks/Peers peer-bench            # a table
//     swift run -c release --package-path Benchmarks/Peers peer-bench --json     # mirror-bench's JSON lines
//     swift run -c release --package-path Benchmarks/Peers peer-bench --quick --only open
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
await BenchCommand.runChild(program: "peer-bench", arguments) { mode, rest in
    guard mode == "--child-open" else { throw PeerError("unknown mode \(mode)") }
    try await PeerWorkloads.childOpen(rest)
}
let command = BenchCommand(program: "peer-bench", workloads: PeerWorkloads.names, arguments: arguments)
let sizes = command.quick ? PeerSizes.quick : PeerSizes.full
await command.run { name in try await PeerWorkloads.run(name, sizes: sizes) }
