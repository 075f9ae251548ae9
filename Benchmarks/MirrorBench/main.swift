// mirror-bench: MagicMirror's speed against the physical limit, side by side in one run.
//
//     swift run -c release mirror-bench            # the full run, as a table
//     swift run -c release mirror-bench --quick    # small sizes (CI runs this)
//     swift run -c release mirror-bench --json     # one JSON object per line
//     swift run -c release mirror-bench --only open,compact
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

if let child = arguments.first, child.hasPrefix("--child-") {
    // Modes the benchmark starts as a second process.
    do {
        try await ChildProcess.run(child, Array(arguments.dropFirst()))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("mirror-bench \(child): \(error)\n".utf8))
        exit(1)
    }
}

var quick = false
var json = false
var only: Set<String>?
var index = 0
while index < arguments.count {
    switch arguments[index] {
    case "--quick": quick = true
    case "--json": json = true
    case "--only":
        index += 1
        guard index < arguments.count else {
            FileHandle.standardError.write(Data("mirror-bench: --only needs a list of workloads\n".utf8))
            exit(2)
        }
        only = Set(arguments[index].split(separator: ",").map(String.init))
    case "--help", "-h":
        print("usage: mirror-bench [--quick] [--json] [--only name,name]\nworkloads: \(Workloads.names.joined(separator: ", "))")
        exit(0)
    default:
        FileHandle.standardError.write(Data("mirror-bench: unknown argument \(arguments[index])\n".utf8))
        exit(2)
    }
    index += 1
}
if let only, let unknown = only.subtracting(Workloads.names).first {
    FileHandle.standardError.write(Data("mirror-bench: unknown workload \(unknown)\n".utf8))
    exit(2)
}

let sizes = quick ? Sizes.quick : Sizes.full
if !json {
    print("mirror-bench \(quick ? "(quick) " : "")on \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Date())")
}
var results: [BenchResult] = []
for name in Workloads.names where only?.contains(name) ?? true {
    if !json { FileHandle.standardError.write(Data("running \(name)…\n".utf8)) }
    do {
        let produced = try await Workloads.run(name, sizes: sizes)
        for result in produced {
            if json { print(Output.json(result)) }
            results.append(result)
        }
    } catch {
        FileHandle.standardError.write(Data("mirror-bench: \(name) failed: \(error)\n".utf8))
        exit(1)
    }
}
if !json { print(Output.table(results)) }
