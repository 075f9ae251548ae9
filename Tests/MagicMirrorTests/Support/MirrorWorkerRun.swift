#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Runs the `mirror-worker` executable (built next to the test bundle) as a real process.
enum MirrorWorkerRun {
    struct Result: Sendable {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    /// The directory the build products are in.
    static var productsDirectory: URL {
        #if os(Linux)
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent()
        #else
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            return bundle.bundleURL.deletingLastPathComponent()
        }
        return Bundle.main.bundleURL.deletingLastPathComponent()
        #endif
    }

    /// The `mirror-worker` executable.
    static var executable: URL { productsDirectory.appendingPathComponent("mirror-worker") }

    /// Runs `mirror-worker` with `arguments` and waits for it to exit; kills it with SIGKILL
    /// after `timeout` (its status is then not 0, so the test fails instead of hanging).
    /// Meant for short outputs.
    static func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let (exits, exited) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { process in
            exited.yield(process.terminationStatus)
            exited.finish()
        }
        try process.run()
        let pid = process.processIdentifier
        let watchdog = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { kill(pid, SIGKILL) }
        }
        // Bounded too: should the termination handler never run, the test fails instead of
        // waiting for ever.
        let status = (try? await firstValue(of: exits, within: timeout + .seconds(30))) ?? -1
        watchdog.cancel()
        let standardOutput = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let standardError = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Result(status: status, standardOutput: standardOutput, standardError: standardError)
    }
}
