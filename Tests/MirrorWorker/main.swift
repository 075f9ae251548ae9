// mirror-worker: a small executable that the multi-process and crash tests start as real
// processes. Each subcommand lives in its own file as a `WorkerCommand`; register it in
// `WorkerCommands.all`.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = WorkerCommands.all[name] else {
    FileHandle.standardError.write(Data(
        "usage: mirror-worker <\(WorkerCommands.all.keys.sorted().joined(separator: "|"))> ...\n".utf8))
    exit(2)
}
do {
    try await command(Array(arguments.dropFirst()))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("mirror-worker \(name): \(error)\n".utf8))
    exit(1)
}
