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
// A worker never outlives the process that started it. When that process goes (a test run
// that crashed), the worker is adopted by another and exits: otherwise it would keep the
// test run's standard error open (many workers share it) and `swift test` would wait for it
// instead of reporting the crash.
let parent = getppid()
Thread.detachNewThread {
    while getppid() == parent { usleep(200_000) }
    exit(3)
}
do {
    try await command(Array(arguments.dropFirst()))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("mirror-worker \(name): \(error)\n".utf8))
    exit(1)
}
