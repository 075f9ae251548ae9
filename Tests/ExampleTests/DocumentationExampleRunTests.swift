import Foundation
import MirrorTestSupport
import Testing

/// Runs the articles' code compiled into `mirror-doc-examples`, with the default database
/// and the home directory in a temporary directory.
@Suite(.timeLimit(.minutes(5))) struct DocumentationExampleRunTests {
    @Test func gettingStartedRunsToItsEnd() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let environment = [
            "MAGICMIRROR_DIRECTORY": folder.path + "/default",
            "HOME": folder.path + "/home",
            "XDG_DATA_HOME": folder.path + "/home/.local/share",
        ]
        let (termination, output, errors) = try await Subprocess.run(
            BuiltProducts.executable("mirror-doc-examples"), ["getting-started"], environment: environment)
        #expect(termination.status == 0, "\(errors)")
        let lines = output.split(separator: "\n").map(String.init)
        // "Use the array": the whole list, then the open items.
        #expect(lines.prefix(2) == ["[ ] Call mum", "[ ] Call mum"], "\(output)")
        // "Observe": the snapshot at once, then the change, pending and committed.
        #expect(lines.contains("0 to do"), "\(output)")
        #expect(lines.contains("inserted Water the plants local pending"), "\(output)")
        #expect(lines.contains("inserted Water the plants local committed"), "\(output)")
        let stored = try #require(lines.last)
        #expect(stored.hasPrefix("stored 2 1 1 1 in \(folder.path)/home/"), "\(output)")
        #if os(Linux)
        // The application support directory is the XDG data directory.
        #expect(FileManager.default.fileExists(atPath: folder.path + "/home/.local/share/MyApp/public/Recipe"))
        #endif
        #expect(FileManager.default.fileExists(atPath: folder.path + "/default/public/Todo"))
    }
}
