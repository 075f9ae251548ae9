import Foundation
import MagicMirror
import Synchronization

/// The directory where ``PostgreSQLDatabase/fileURL(for:in:)`` puts the assets it
/// downloads: one of this database instance's own in the temporary directory, readable by
/// this operating-system user only (0700), made on first use and removed by
/// ``PostgreSQLDatabase/close()``. Files are named by digest and written under another name
/// first, so a file there with the asset's name and size is a whole copy.
final class AssetCache: Sendable {
    private let path: String
    private let made = Mutex(false)

    init(writer: String) {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("magicmirror-assets-\(writer)").path
    }

    /// The directory, made if needed.
    func directory() throws -> URL {
        try made.withLock { made in
            if !made {
                do {
                    try FileManager.default.createDirectory(
                        atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    throw MirrorError(
                        .ioFailure, "cannot make \(path) to hold downloaded assets: \(error.localizedDescription)",
                        file: path, underlying: error)
                }
                made = true
            }
        }
        return URL(fileURLWithPath: path, isDirectory: true)
    }

    /// Removes the directory and what it holds.
    func remove() {
        made.withLock { made in
            if made { try? FileManager.default.removeItem(atPath: path) }
            made = false
        }
    }
}
