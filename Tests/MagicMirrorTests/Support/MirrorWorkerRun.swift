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

    /// Runs `mirror-worker` with `arguments` and waits for it to exit. Meant for short outputs.
    static func run(_ arguments: [String]) async throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        let standardOutput = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let standardError = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Result(status: status, standardOutput: standardOutput, standardError: standardError)
    }
}
