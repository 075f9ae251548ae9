// swift-tools-version: 6.0
import PackageDescription

// MagicMirror on PostgreSQL: a second package, so that the root package keeps no dependencies.
let package = Package(
    name: "MagicMirrorPostgreSQL",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "MagicMirrorPostgreSQL", targets: ["MagicMirrorPostgreSQL"]),
    ],
    dependencies: [
        .package(name: "MagicMirror", path: "../.."),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        // Come with postgres-nio; named because the adapter imports them (a silent logger;
        // SHA-256, the digest that names an asset).
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.9.0"..<"6.0.0"),
    ],
    targets: [
        .target(
            name: "MagicMirrorPostgreSQL",
            dependencies: [
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // mirror-todo on a server: the root package's console (TodoConsoleKit), another database.
        .executableTarget(
            name: "mirror-todo-postgres",
            dependencies: [
                "MagicMirrorPostgreSQL",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "TodoConsoleKit", package: "MagicMirror"),
            ],
            path: "Examples/TodoPostgres"
        ),
        // The adapter's benchmark: Scripts/with-postgres.sh swift run -c release mirror-bench-postgres.
        // Measurement.swift, BenchRecord.swift and ChildProcess.swift are links to mirror-bench's, so that the
        // --json shape and the record are the same.
        .executableTarget(
            name: "mirror-bench-postgres",
            dependencies: [
                "MagicMirrorPostgreSQL",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/PostgresBench"
        ),
        // One real process of the multi-process tests.
        .executableTarget(
            name: "pg-mirror-worker",
            dependencies: [
                "MagicMirrorPostgreSQL",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MirrorTesting", package: "MagicMirror"),
                .product(name: "MirrorTestSupport", package: "MagicMirror"),
            ],
            path: "Tests/PostgreSQLWorker"
        ),
        // Run against a real server: `Scripts/with-postgres.sh swift test` (see .ci/run).
        .testTarget(
            name: "MagicMirrorPostgreSQLTests",
            dependencies: [
                "MagicMirrorPostgreSQL",
                "pg-mirror-worker",
                "mirror-todo-postgres",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MirrorTestSupport", package: "MagicMirror"),
                .product(name: "MirrorTesting", package: "MagicMirror"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
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
