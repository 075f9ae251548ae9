// mirror-bench: MagicMirror's speed against the physical limit, side by side in one run.
//
//     swift run -c release mirror-bench            # the full run, as a table
//     swift run -c release mirror-bench --quick    # small sizes (CI runs this)
//     swift run -c release mirror-bench --json     # one JSON object per line
//     swift run -c release mirror-bench --only open,compact
//     swift run -c release mirror-bench --only open --open-records 1000000
//                                                  # records the open workload opens
//                                                  # (100,000; 2,000 with --quick)
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
// Modes the benchmark starts as a second process.
await BenchCommand.runChild(program: "mirror-bench", arguments) { mode, rest in
    try await ChildProcess.run(mode, rest)
}
let command = BenchCommand(
    program: "mirror-bench", workloads: Workloads.names, options: ["open-records": "N"], arguments: arguments)
var sizes = command.quick ? Sizes.quick : Sizes.full
if let text = command.values["open-records"] {
    guard let records = Int(text), records > 0 else {
        BenchCommand.fail("mirror-bench", "--open-records takes a positive number of records, not \(text)")
    }
    sizes.open = records
}
await command.run { name in try await Workloads.run(name, sizes: sizes) }
