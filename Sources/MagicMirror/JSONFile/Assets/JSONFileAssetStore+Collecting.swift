import Foundation
import Synchronization

/// Collecting assets: under `lock` held exclusive, the files no live record refers to and
/// no live writer leases are removed.
extension JSONFileAssetStore {
    /// Removes the asset files no live record of the zone refers to and no live writer
    /// leases, the temporary files and leases of dead writers.
    ///
    /// - Parameter referenced: Reads the digests the zone's live records refer to (called
    ///   with `lock` held exclusive).
    /// - Returns: How many asset files were removed.
    func removeUnreferenced(
        listing names: (Int32) -> [String], referenced: () throws(MirrorError) -> Set<String>
    ) throws(MirrorError) -> Int {
        guard let directory = try openDirectory(create: false) else { return 0 }
        defer { close(directory) }
        return try withLock(directory, shared: false) { () throws(MirrorError) -> Int in
            let entries = names(directory)
            var leased = lease.withLock { $0.digests }
            var liveWriters: Set<String> = [context.writerID]
            var changed = false
            for name in entries where name.hasPrefix(Self.leasePrefix) {
                let writer = String(name.dropFirst(Self.leasePrefix.count))
                if writer == context.writerID { continue }
                guard let fd = try? fileSystem.open(at: directory, name, flags: O_RDONLY | O_NOFOLLOW) else { continue }
                defer { close(fd) }
                if FileLock.tryLock(fd) == 0 {
                    // No process holds it: its writer is gone, and so is what it did not commit.
                    try? fileSystem.unlink(at: directory, name)
                    changed = true
                } else {
                    liveWriters.insert(writer)
                    let text = String(decoding: (try? JSONFileIO.readAll(fd)) ?? [], as: UTF8.self)
                    for line in text.split(separator: "\n") where Asset.isDigest(String(line)) {
                        leased.insert(String(line))
                    }
                }
            }
            let kept = try referenced().union(leased)
            var removed = 0
            for name in entries {
                if Asset.isDigest(name) {
                    guard !kept.contains(name) else { continue }
                    if (try? fileSystem.unlink(at: directory, name)) != nil {
                        removed += 1
                        changed = true
                    }
                } else if name.hasPrefix(Self.temporaryPrefix) {
                    let rest = name.dropFirst(Self.temporaryPrefix.count)
                    guard let dot = rest.lastIndex(of: "."), !liveWriters.contains(String(rest[..<dot])) else { continue }
                    if (try? fileSystem.unlink(at: directory, name)) != nil { changed = true }
                }
            }
            if changed { try? fileSystem.sync(directory, metadata: true) }
            return removed
        }
    }
}
