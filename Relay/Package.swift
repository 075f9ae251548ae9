// swift-tools-version: 6.2
import PackageDescription

// mirror-relay: many users' apps on one PostgreSQL, over HTTP. A package of its own, so that
// the root package keeps no dependencies and the adapter keeps only postgres-nio's.
let package = Package(
    name: "MirrorRelay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mirror-relay", targets: ["mirror-relay"]),
        .executable(name: "mirror-todo-relay", targets: ["mirror-todo-relay"]),
        .executable(name: "relay-bench", targets: ["relay-bench"]),
        .library(name: "MirrorRelayServer", targets: ["MirrorRelayServer"]),
    ],
    dependencies: [
        .package(name: "MagicMirror", path: ".."),
        .package(name: "MagicMirrorPostgreSQL", path: "../Adapters/PostgreSQL"),
        // The HTTP server.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // Tokens: HS256 and ES256 signatures, expiry and audience.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
        // Come with Hummingbird and the adapter; named because the relay imports them
        // (ByteBuffer; the connection a commit records its idempotency key on).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        // Comes with Hummingbird: HTTP statuses and header names.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        // Comes with Hummingbird: a stream (/v1/stream) ends when the relay shuts down.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        // Comes with jwt-kit: the SHA-256 of a commit's body, stored with its idempotency key.
        .package(url: "https://github.com/apple/swift-crypto.git", "4.1.0"..<"6.0.0"),
        // Comes with Hummingbird: the HTTP part a stream's line is written as, on its
        // connection (StreamOutlet).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
    ],
    targets: [
        // The relay as a library: configuration, tokens, routes, fan-out; the tests start it.
        .target(
            name: "MirrorRelayServer",
            dependencies: [
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MagicMirrorRelay", package: "MagicMirror"),
                .product(name: "MagicMirrorPostgreSQL", package: "MagicMirrorPostgreSQL"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                // Its parser's errors (a body the client framed wrong) are the client's: 400.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ]
        ),
        .executableTarget(
            name: "mirror-relay",
            dependencies: ["MirrorRelayServer"]
        ),
        // The example's console through a relay: mirror-todo's list for many users.
        .executableTarget(
            name: "mirror-todo-relay",
            dependencies: [
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MagicMirrorRelay", package: "MagicMirror"),
                .product(name: "TodoConsoleKit", package: "MagicMirror"),
            ],
            path: "Examples/TodoRelay"
        ),
        // The relay's benchmark: Adapters/PostgreSQL/Scripts/with-postgres.sh swift run -c release
        // --package-path Relay relay-bench. Measurement.swift is a link to mirror-bench's, so that the
        // --json shape is the same. Its clients are SwiftNIO channels (NIOPosix, NIOHTTP1: from the
        // graph, through Hummingbird), since one URLSession task per client cannot hold thousands.
        .executableTarget(
            name: "relay-bench",
            dependencies: [
                // Built beside the bench (not linked), which starts it.
                "mirror-relay",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MagicMirrorRelay", package: "MagicMirror"),
                // The commit workload's direct baseline.
                .product(name: "MagicMirrorPostgreSQL", package: "MagicMirrorPostgreSQL"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/RelayBench"
        ),
        // Against real relay processes and a throwaway server: run by Scripts/test-all.sh.
        .testTarget(
            name: "MirrorRelayTests",
            dependencies: [
                "MirrorRelayServer",
                "mirror-relay",
                "mirror-todo-relay",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MagicMirrorRelay", package: "MagicMirror"),
                .product(name: "MirrorTesting", package: "MagicMirror"),
                .product(name: "MirrorTestSupport", package: "MagicMirror"),
                .product(name: "MagicMirrorPostgreSQL", package: "MagicMirrorPostgreSQL"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // A stream's connection played by the tests (RecordingOutlet).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // Not for relay-bench: in its release build, the `timespec` of mirror-bench's shared
    // Measurement.swift resolves to CoreFoundation's, which that file (shared with the root
    // package and the adapter) does not import.
    if target.name != "relay-bench" {
        settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    }
    target.swiftSettings = settings
}
