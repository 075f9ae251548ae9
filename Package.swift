// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "MagicMirror",
    // What the code needs: Synchronization's Mutex and Observation (macOS 15, iOS 18, tvOS 18,
    // watchOS 11, visionOS 2); no Process or posix_spawn in the libraries, kqueue on Darwin.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "MagicMirror", targets: ["MagicMirror"]),
        .library(name: "MirrorTesting", targets: ["MirrorTesting"]),
        // A database that talks to a mirror-relay over HTTP (URLSession): Relay/.
        .library(name: "MagicMirrorRelay", targets: ["MagicMirrorRelay"]),
        .executable(name: "mirror-db", targets: ["mirror-db"]),
        // The example's console, for mirror-todo-postgres in Adapters/PostgreSQL.
        .library(name: "TodoConsoleKit", targets: ["TodoConsoleKit"]),
        // Child processes for tests (posix_spawn), for Adapters/PostgreSQL's tests; not API.
        .library(name: "MirrorTestSupport", targets: ["MirrorTestSupport"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "MagicMirror"),
        .target(name: "MirrorTesting", dependencies: ["MagicMirror"]),
        .target(name: "MagicMirrorRelay", dependencies: ["MagicMirror"]),
        // The example: a shared to-do list that several processes edit live. The console
        // takes its database from the executable, so mirror-todo-postgres shares it.
        .target(name: "TodoConsoleKit", dependencies: ["MagicMirror"], path: "Examples/TodoConsoleKit"),
        .executableTarget(
            name: "mirror-todo",
            dependencies: ["TodoConsoleKit"],
            path: "Examples/TodoConsole"
        ),
        // The README's usage tour, compiled and run by ExampleTests: `swift run mirror-tour`.
        .executableTarget(
            name: "mirror-tour",
            dependencies: ["MagicMirror"],
            path: "Examples/Tour"
        ),
        // A tool to look inside a database: `swift run mirror-db help`.
        .executableTarget(
            name: "mirror-db",
            dependencies: ["MagicMirror"],
            path: "Tools/MirrorDB"
        ),
        // The benchmark: `swift run -c release mirror-bench`.
        .executableTarget(
            name: "mirror-bench",
            dependencies: ["MagicMirror", "MirrorTestSupport"],
            path: "Benchmarks/MirrorBench"
        ),
        // A small executable the multi-process and crash tests start as real processes.
        .executableTarget(
            name: "mirror-worker",
            dependencies: ["MagicMirror", "MirrorTesting", "MirrorTestSupport"],
            path: "Tests/MirrorWorker"
        ),
        // The DocC articles' code that runs as a program of its own, run by ExampleTests.
        .executableTarget(
            name: "mirror-doc-examples",
            dependencies: ["MagicMirror"],
            path: "Tests/DocumentationExamples"
        ),
        // Test support shared by the test targets (child processes); not a product.
        .target(name: "MirrorTestSupport", dependencies: ["MagicMirror"], path: "Tests/Support"),
        .testTarget(
            name: "MagicMirrorTests",
            dependencies: ["MagicMirror", "MirrorTesting", "MirrorTestSupport", "mirror-worker"]
        ),
        .testTarget(
            name: "ExampleTests",
            dependencies: ["MirrorTestSupport", "mirror-todo", "mirror-tour", "mirror-doc-examples", "mirror-db"]
        ),
        .testTarget(
            name: "MirrorTestingTests",
            dependencies: ["MagicMirror", "MirrorTesting"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
