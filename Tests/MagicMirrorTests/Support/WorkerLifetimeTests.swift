import Foundation
import MirrorTestSupport
import Testing

/// A `mirror-worker` exits when the process that started it goes, so that a test run that
/// crashes fails instead of hanging on workers that hold its standard error open.
@Suite(.timeLimit(.minutes(5))) struct WorkerLifetimeTests {
    /// Whether process `pid` is gone (or a zombie, waiting to be reaped by whoever adopted
    /// it).
    static func hasExited(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else {
            return kill(pid, 0) != 0
        }
        // The state follows the parenthesised command name.
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    @Test func aWorkerWhoseParentIsKilledExits() async throws {
        let worker = try JSONFileTestSupport.workerExecutable()
        // A shell starts the worker, prints its pid, and becomes `sleep` (same process).
        let shell = try Subprocess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", #""$0" hold & echo "$!"; exec sleep 600"#, worker.path])
        // The worker's "waiting" and the shell's pid line, in either order.
        let lines = [try await shell.nextLine(), try await shell.nextLine()]
        #expect(lines.contains("waiting"))
        let workerPID = try #require(lines.compactMap { Int32($0) }.first)
        #expect(!Self.hasExited(workerPID))

        shell.kill(SIGKILL)
        _ = try await shell.wait()
        var exited = false
        for _ in 0..<600 where !exited {
            exited = Self.hasExited(workerPID)
            if !exited { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(exited, "the worker exits once its parent is gone")
        if !exited { kill(workerPID, SIGKILL) }
    }
}
