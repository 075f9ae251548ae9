// swift-tools-version: 6.0
import PackageDescription

// MagicMirror beside its peer, GRDB (SQLite), in one run:
//
//     swift run -c release --package-path Benchmarks/Peers peer-bench
//
// A package of its own, so that the root package keeps no dependencies. The record type,
// the timing and output helpers, the command line, the child processes and the raw-disk
// baselines are mirror-bench's own files (symbolic links into ../MirrorBench), so both
// benchmarks measure the same thing the same way.
let package = Package(
    name: "MagicMirrorPeers",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "MagicMirror", path: "../.."),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "peer-bench",
            dependencies: [
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MirrorTestSupport", package: "MagicMirror"),
                .product(name: "GRDB", package: "GRDB.swift"),
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
