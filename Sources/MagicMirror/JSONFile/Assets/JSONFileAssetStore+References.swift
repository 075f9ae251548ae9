import Foundation

/// Committing records that refer to assets: each file is checked and held (`lock`
/// shared) until the records are stored, then taken off this writer's lease.
extension JSONFileAssetStore {
    /// Checks that every asset in `referenced` is stored and takes `lock` shared, so that
    /// no collection removes one until the returned descriptor is closed: hold it until the
    /// records that refer to them are committed, then call ``committed(_:)``.
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` for a missing asset,
    ///   ``MirrorError/Kind/corruptEntry`` for one replaced by something else than a file.
    func holdReferences(_ referenced: Set<String>, recordIDs: [String]) async throws(MirrorError) -> Int32 {
        let digests = referenced.sorted()
        guard let directory = try openDirectory(create: false) else {
            throw missing(digests[0], recordIDs: recordIDs)
        }
        defer { close(directory) }
        let lockFD = try await lockAsynchronously(directory, shared: true)
        for digest in digests {
            guard let info = JSONFileIO.info(at: directory, digest) else {
                close(lockFD)
                throw missing(digest, recordIDs: recordIDs)
            }
            if info.isSymbolicLink || info.isDirectory {
                close(lockFD)
                throw located(MirrorError(
                    .corruptEntry,
                    "\(path(digest)) is not an asset file (another program replaced it); the records "
                        + "that refer to it were not committed. Store the asset again.",
                    recordIDs: recordIDs, file: path(digest)))
            }
        }
        return lockFD
    }

    /// Records that refer to `digests` were committed: the assets leave this writer's lease.
    /// Call it while holding the descriptor ``holdReferences(_:recordIDs:)`` returned.
    func committed(_ digests: Set<String>) {
        releaseFromLease(digests)
    }

    private func missing(_ digest: String, recordIDs: [String]) -> MirrorError {
        located(MirrorError(
            .notFound,
            "the asset \(digest) is not stored in \(zone) (no file \(path(digest))); the records "
                + "that refer to it were not committed. Store the asset in this zone first.",
            recordIDs: recordIDs, file: path(digest)))
    }
}
