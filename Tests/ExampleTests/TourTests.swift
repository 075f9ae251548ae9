import Foundation
import MirrorTestSupport
import Testing

/// Runs `mirror-tour`, the README's usage program, as a reader who pasted it would.
@Suite(.timeLimit(.minutes(5))) struct TourTests {
    @Test func theUsageProgramRunsToItsEndAndLeavesTheListAsItWas() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let environment = ["MAGICMIRROR_DIRECTORY": folder.path]

        for run in 1...2 {
            let (termination, output, errors) = try await Subprocess.run(
                BuiltProducts.executable("mirror-tour"), [], environment: environment)
            #expect(termination.status == 0, "run \(run): \(errors)")
            let lines = output.split(separator: "\n").map(String.init)
            #expect(lines.first == "observed 0 to-dos", "run \(run): \(output)")
            #expect(lines.contains("inserted pending"), "run \(run): \(output)")
            #expect(lines.contains("inserted committed"), "run \(run): \(output)")
            #expect(lines.contains("0 open of 1"), "run \(run): \(output)")
            #expect(errors.isEmpty, "run \(run): \(errors)")
        }
        let journal = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/public/Todo")
        #expect(journal.contains { $0.hasPrefix("journal-") })
    }
}
