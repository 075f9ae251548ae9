import Foundation
import Testing

/// The test command prints nothing that looks like a failure (issue #36, point 9): every
/// test is a Swift Testing test, so `Scripts/test-all.sh` runs each package's tests with
/// `--disable-xctest`, and the XCTest runner, with nothing to run, prints no
/// "Executed 0 tests" line.
@Suite(.timeLimit(.minutes(5))) struct TestCommandTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func everySwiftTestOfTheScriptSkipsXCTest() throws {
        let script = try String(contentsOf: Self.packageRoot.appendingPathComponent("Scripts/test-all.sh"), encoding: .utf8)
        let commands = script.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("swift test") }
        // The root, the cipher, the PostgreSQL adapter, the relay.
        #expect(commands.count == 4, "\(commands)")
        for command in commands { #expect(command.contains("swift test --disable-xctest"), "\(command)") }
    }

    @Test func noTestUsesXCTestSoDisablingItSkipsNothing() throws {
        var found: [String] = []
        for folder in ["Tests", "Adapters", "Relay"] {
            let root = Self.packageRoot.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { continue }
            while let url = walker.nextObject() as? URL {
                if url.lastPathComponent.hasPrefix(".") { walker.skipDescendants(); continue }
                guard url.pathExtension == "swift", url.path.contains("/Tests/") || folder == "Tests" else { continue }
                let text = try String(contentsOf: url, encoding: .utf8)
                if text.split(separator: "\n").contains(where: { $0.hasPrefix("import XCTest") }) { found.append(url.path) }
            }
        }
        #expect(found.isEmpty, "these tests would no longer run: \(found)")
    }
}
