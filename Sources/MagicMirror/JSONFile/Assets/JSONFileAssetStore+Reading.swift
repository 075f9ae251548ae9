import Foundation

/// Reading assets: each file is checked against its size and digest name before it is used.
extension JSONFileAssetStore {
    /// The checked file of `asset`.
    func fileURL(for asset: Asset) throws(MirrorError) -> URL {
        guard let directory = try openDirectory(create: false) else { throw missingFile(asset) }
        defer { close(directory) }
        guard let info = JSONFileIO.info(at: directory, asset.digest) else { throw missingFile(asset) }
        try check(info, of: asset)
        return URL(fileURLWithPath: path(asset.digest), isDirectory: false)
    }

    /// Opens the file of `asset` for reading, checked.
    func open(_ asset: Asset) throws(MirrorError) -> Int32 {
        guard let directory = try openDirectory(create: false) else { throw missingFile(asset) }
        defer { close(directory) }
        let fd: Int32
        do {
            fd = try fileSystem.open(at: directory, asset.digest, flags: O_RDONLY | O_NOFOLLOW)
        } catch {
            if error.code == ENOENT { throw missingFile(asset) }
            if error.code == ELOOP { throw changedFile(asset, "is a symbolic link") }
            throw located(error.mirrorError(file: path(asset.digest)))
        }
        guard let info = JSONFileIO.info(fd) else {
            close(fd)
            throw located(MirrorError.posix(errno, "fstat", file: path(asset.digest)))
        }
        do throws(MirrorError) {
            try check(info, of: asset)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    private func check(_ info: JSONFileIO.FileInfo, of asset: Asset) throws(MirrorError) {
        if info.isSymbolicLink { throw changedFile(asset, "is a symbolic link") }
        if info.isDirectory { throw changedFile(asset, "is a directory") }
        if info.size != asset.size { throw changedFile(asset, "has \(info.size) bytes, not \(asset.size)") }
    }

    func missingFile(_ asset: Asset) -> MirrorError {
        located(MirrorError(
            .notFound,
            "the file of \(asset) is missing: \(path(asset.digest)) was removed by another program "
                + "(or the asset was never stored in \(zone)). The records are unchanged.",
            file: path(asset.digest)))
    }

    func changedFile(_ asset: Asset, _ what: String) -> MirrorError {
        located(MirrorError(
            .corruptEntry,
            "the file of \(asset), \(path(asset.digest)), \(what): another program changed it. "
                + "The records are unchanged; store the asset again to repair it.",
            file: path(asset.digest)))
    }
}
