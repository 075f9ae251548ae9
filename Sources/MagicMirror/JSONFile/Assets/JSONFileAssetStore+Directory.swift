import Dispatch
import Foundation
import Synchronization

/// The zone's `assets` directory and its `lock`, opened without following symbolic links.
extension JSONFileAssetStore {
    /// Opens the zone's `assets` directory without following symbolic links, creating it
    /// when asked; `nil` when it does not exist and `create` is `false`. The zone's own
    /// directories must exist (the zone was loaded).
    func openDirectory(create: Bool) throws(MirrorError) -> Int32? {
        var parent = context.rootFD
        var current = context.rootPath
        var opened: [Int32] = []
        var result: Int32 = -1
        // Every directory opened on the way, except the one returned.
        defer { for fd in opened where fd != result { close(fd) } }
        let components = JSONFileZone.components(of: zone) + [Self.directoryName]
        for (index, name) in components.enumerated() {
            current += "/" + name
            let isLast = index == components.count - 1
            var fd: Int32 = -1
            for _ in 0..<3 where fd < 0 {
                do {
                    fd = try fileSystem.open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                } catch {
                    if error.code == ENOENT && isLast {
                        guard create else { return nil }
                        do {
                            try fileSystem.makeDirectory(at: parent, name, mode: isPrivate ? 0o700 : 0o777)
                            try? fileSystem.sync(parent, metadata: true)
                        } catch {
                            if error.code != EEXIST { throw located(error.mirrorError(file: current)) }
                        }
                        continue
                    }
                    if error.code == ENOENT { return nil }
                    if error.code == ELOOP || error.code == ENOTDIR {
                        throw located(MirrorError(
                            .permissionDenied,
                            "\(current) is not a directory (a symbolic link?); the JSON-file database "
                                + "does not follow links below its directory, so it never reads or "
                                + "writes outside it",
                            file: current))
                    }
                    throw located(error.mirrorError(file: current))
                }
            }
            guard fd >= 0 else {
                throw located(MirrorError(.ioFailure, "could not create the directory \(current)", file: current))
            }
            opened.append(fd)
            parent = fd
        }
        result = parent
        return result
    }

    /// Opens `lock` in the assets directory.
    private func openLockFile(_ directory: Int32) throws(MirrorError) -> Int32 {
        do {
            return try fileSystem.openWritableOrReadOnly(
                at: directory, Self.lockName, flags: O_CREAT, mode: isPrivate ? 0o600 : 0o666).fd
        } catch {
            throw located(error.mirrorError(file: path(Self.lockName)))
        }
    }

    /// Runs `body` holding `lock`, blocking this thread while another holds it.
    func withLock<Value>(
        _ directory: Int32, shared: Bool, _ body: () throws(MirrorError) -> Value
    ) throws(MirrorError) -> Value {
        let fd = try openLockFile(directory)
        defer { close(fd) }
        let code = FileLock.lock(fd, shared: shared)
        guard code == 0 else { throw located(MirrorError.posix(code, "flock", file: path(Self.lockName))) }
        return try body()
    }

    /// Takes `lock` without blocking a task's thread: at once when it is free, otherwise on
    /// a dispatch thread. Closing the returned descriptor releases it.
    func lockAsynchronously(_ directory: Int32, shared: Bool) async throws(MirrorError) -> Int32 {
        let fd = try openLockFile(directory)
        var code = FileLock.tryLock(fd, shared: shared)
        if code == EWOULDBLOCK {
            code = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: FileLock.lock(fd, shared: shared))
                }
            }
        }
        guard code == 0 else {
            close(fd)
            throw located(MirrorError.posix(code, "flock", file: path(Self.lockName)))
        }
        return fd
    }
}
