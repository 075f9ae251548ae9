#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorTestSupport

/// Runs the `mirror-worker` executable (built next to the test bundle) as a real process.
enum MirrorWorkerRun {
    struct Result: Sendable {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    /// The `mirror-worker` executable.
    static var executable: URL { BuiltProducts.executable("mirror-worker") }

    /// Runs `mirror-worker` with `arguments` and waits for it to exit; kills it with SIGKILL
    /// after `timeout` (the test then fails instead of hanging).
    static func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> Result {
        let (termination, standardOutput, standardError) = try await Subprocess.run(
            executable, arguments, timeout: timeout)
        return Result(status: termination.status, standardOutput: standardOutput, standardError: standardError)
    }
}
