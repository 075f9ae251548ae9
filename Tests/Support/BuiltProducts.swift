import Foundation

/// The executables this package builds, found next to the running test bundle.
public enum BuiltProducts {
    /// The directory the build products are in.
    public static var directory: URL {
        #if os(Linux)
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        #else
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            return bundle.bundleURL.deletingLastPathComponent()
        }
        return Bundle.main.bundleURL.deletingLastPathComponent()
        #endif
    }

    /// The executable product `name` (`mirror-todo`, `mirror-db`, …).
    public static func executable(_ name: String) -> URL {
        directory.appendingPathComponent(name)
    }
}
