// peer-bench: MagicMirror beside GRDB (SQLite), the same workloads in one run.
//
//     swift run -c release --package-path Benchmarks/Peers peer-bench            # a table
//     swift run -c release --package-path Benchmarks/Peers peer-bench --json     # mirror-bench's JSON lines
//     swift run -c release --package-path Benchmarks/Peers peer-bench --quick --only open
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

if arguments.first == "--child-open" {
    do {
        try await PeerWorkloads.childOpen(Array(arguments.dropFirst()))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("peer-bench --child-open: \(error)\n".utf8))
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
    case "--only" where index + 1 < arguments.count:
        index += 1
        only = Set(arguments[index].split(separator: ",").map(String.init))
    case "--help", "-h":
        print("usage: peer-bench [--quick] [--json] [--only name,name]\nworkloads: \(PeerWorkloads.names.joined(separator: ", "))")
        exit(0)
    default:
        FileHandle.standardError.write(Data("peer-bench: unknown or incomplete argument \(arguments[index])\n".utf8))
        exit(2)
    }
    index += 1
}
if let only, let unknown = only.subtracting(PeerWorkloads.names).first {
    FileHandle.standardError.write(Data("peer-bench: unknown workload \(unknown)\n".utf8))
    exit(2)
}

let sizes = quick ? PeerSizes.quick : PeerSizes.full
if !json {
    print("peer-bench \(quick ? "(quick) " : "")on \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Date())")
}
var results: [BenchResult] = []
for name in PeerWorkloads.names where only?.contains(name) ?? true {
    if !json { FileHandle.standardError.write(Data("running \(name)…\n".utf8)) }
    do {
        for result in try await PeerWorkloads.run(name, sizes: sizes) {
            if json { print(Output.json(result)) }
            results.append(result)
        }
    } catch {
        FileHandle.standardError.write(Data("peer-bench: \(name) failed: \(error)\n".utf8))
        exit(1)
    }
}
if !json { print(Output.table(results)) }
