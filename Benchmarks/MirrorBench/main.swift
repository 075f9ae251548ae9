// mirror-bench: MagicMirror's speed against the physical limit, side by side in one run.
//
//     swift run -c release mirror-bench            # the full run, as a table
//     swift run -c release mirror-bench --quick    # small sizes (CI runs this)
//     swift run -c release mirror-bench --json     # one JSON object per line
//     swift run -c release mirror-bench --only open,compact
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
// Modes the benchmark starts as a second process.
await BenchCommand.runChild(program: "mirror-bench", arguments) { mode, rest in
    try await ChildProcess.run(mode, rest)
}
let command = BenchCommand(program: "mirror-bench", workloads: Workloads.names, arguments: arguments)
let sizes = command.quick ? Sizes.quick : Sizes.full
await command.run { name in try await Workloads.run(name, sizes: sizes) }
