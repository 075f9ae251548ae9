#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing

/// Every Swift code block of the README and of every DocC article is compiled, and run
/// where it can run, by the package's tests: it appears exactly as printed in a Swift file
/// of `Tests/`, `Examples/`, an adapter's or the relay's `Tests/` (the articles' own tests say which),
/// or it says that it is a fragment on its first line, `// Fragment: …`, which readers see.
///
/// The README's Quick start commands are run by `.ci/run` (checked below); its other shell
/// commands are those of `mirror-todo` and `mirror-db`, which ExampleTests run as a user
/// would.
@Suite(.timeLimit(.minutes(5))) struct DocumentationCodeBlockTests {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()    // MirrorTestingTests
        .deletingLastPathComponent()    // Tests
        .deletingLastPathComponent()

    /// The marker that makes a block a deliberate fragment.
    static let fragmentMarker = "// Fragment: "

    /// The paths, from the package's root, of the files under `folder` whose name ends in
    /// `suffix`.
    private static func files(under folder: String, endingIn suffix: String) -> [String] {
        let root = packageRoot.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else {
            return []
        }
        var found: [String] = []
        while let url = walker.nextObject() as? URL {
            // Not into build folders (.build) or other hidden ones.
            if url.lastPathComponent.hasPrefix(".") {
                walker.skipDescendants()
            } else if url.lastPathComponent.hasSuffix(suffix) {
                found.append(folder + url.path.dropFirst(root.path.count))
            }
        }
        return found.sorted()
    }

    /// README.md and every article of every DocC catalog, the adapters' included.
    static var documents: [String] {
        let catalogs = (files(under: "Sources", endingIn: ".md") + files(under: "Adapters", endingIn: ".md"))
            .filter { $0.contains(".docc/") }
        return ["README.md"] + catalogs
    }

    /// Every Swift file the tests compile: the tests, the examples, the adapters' tests.
    static var compiledSources: [String] {
        (files(under: "Tests", endingIn: ".swift") + files(under: "Examples", endingIn: ".swift")
            + files(under: "Adapters", endingIn: ".swift").filter { $0.contains("/Tests/") }
            + files(under: "Relay", endingIn: ".swift").filter { $0.contains("/Tests/") })
    }

    private static func read(_ path: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func everySwiftBlockIsCompiledOrMarkedAsAFragment() throws {
        let paths = Self.compiledSources
        #expect(paths.count > 50)
        // Every source's bytes in one buffer, searched as bytes: `String.contains` over a few
        // hundred files takes seconds, and would hold a thread that other tests need.
        var sources: [UInt8] = []
        for path in paths {
            sources += try Data(contentsOf: Self.packageRoot.appendingPathComponent(path))
            sources.append(0)
        }
        func isInSources(_ block: String) -> Bool {
            let needle = Array(block.utf8)
            guard let first = needle.first else { return true }
            return sources.withUnsafeBufferPointer { haystack in
                needle.withUnsafeBufferPointer { needle in
                    // memchr for the first byte, memcmp for the rest: C speed, even in debug.
                    var start = 0
                    while haystack.count - start >= needle.count,
                          let found = memchr(haystack.baseAddress! + start, Int32(first), haystack.count - start - needle.count + 1) {
                        let offset = haystack.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                        if memcmp(found, needle.baseAddress!, needle.count) == 0 { return true }
                        start = offset + 1
                    }
                    return false
                }
            }
        }
        var checked = 0
        var fragments: [String] = []
        for document in Self.documents {
            for block in DocumentationArticleTests.swiftCodeBlocks(in: try Self.read(document)) {
                checked += 1
                if block.hasPrefix(Self.fragmentMarker) {
                    fragments.append(document)
                    continue
                }
                #expect(
                    isInSources(block),
                    "this block of \(document) is in no test source as it is printed; add it to one, or begin it with \(Self.fragmentMarker.debugDescription):\n\(block)")
            }
        }
        #expect(Self.documents.contains("Sources/MagicMirror/Documentation.docc/GettingStarted.md"))
        #expect(checked >= 20, "\(checked) blocks in \(Self.documents)")
        // Fragments are the exception: the lines of a package manifest, and what needs an
        // Apple platform's SDK.
        #expect(fragments.count <= 2, "\(fragments)")
    }

    @Test func theQuickStartCommandsAreRunByCI() throws {
        let readme = try Self.read("README.md")
        let start = try #require(readme.range(of: "## Quick start\n"))
        let rest = readme[start.upperBound...]
        let section = rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
        let commands = Self.codeBlocks(in: String(section), language: "sh").flatMap { $0.split(separator: "\n") }
        #expect(commands.count == 2, "\(commands)")
        let ci = try Self.read(".ci/run").split(separator: "\n")
        for command in commands {
            #expect(ci.contains(command), "the README's command \(command) is not a line of .ci/run")
        }
    }

    @Test func theCheckFindsMissingBlocksAndFragments() {
        let markdown = "# A\n\n```swift\n// Fragment: in Package.swift\n.package(path: \"x\")\n```\n\n```sh\nls\n```\n"
        let blocks = DocumentationArticleTests.swiftCodeBlocks(in: markdown)
        #expect(blocks == ["// Fragment: in Package.swift\n.package(path: \"x\")"])
        #expect(blocks[0].hasPrefix(Self.fragmentMarker))
        #expect(Self.codeBlocks(in: markdown, language: "sh") == ["ls"])
    }

    /// The contents of every fenced code block marked `language`, without the fences.
    static func codeBlocks(in markdown: String, language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil {
                if trimmed == "```" + language { current = [] }
            } else if trimmed == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current!.append(line)
            }
        }
        return blocks
    }
}
