// swift-tools-version: 6.0
import PackageDescription

// An AES-GCM RecordCipher for MagicMirror: a second package, so that the root package keeps
// no dependencies.
let package = Package(
    name: "MagicMirrorEncryption",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "MagicMirrorEncryption", targets: ["MagicMirrorEncryption"]),
    ],
    dependencies: [
        .package(name: "MagicMirror", path: "../.."),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.0"),
    ],
    targets: [
        .target(
            name: "MagicMirrorEncryption",
            dependencies: [
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "MagicMirrorEncryptionTests",
            dependencies: [
                "MagicMirrorEncryption",
                .product(name: "MagicMirror", package: "MagicMirror"),
                .product(name: "MirrorTesting", package: "MagicMirror"),
                .product(name: "Crypto", package: "swift-crypto"),
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
