import Dispatch
import Foundation
import Synchronization

// macOS: a kqueue vnode source on each directory and on each file in it.

#if canImport(Darwin)
extension DirectoryWatcher.Core {
    /// The vnode sources of the watched directories and of the files in them.
    struct NativeState: ~Copyable {
        var directories: [String: WatchedDirectory] = [:]
    }

    /// A directory's source and one source per file in it.
    struct WatchedDirectory {
        /// The inode the directory's source watches: when the path names another one (or
        /// none), the directory was moved or deleted.
        var inode: UInt64
        var source: any DispatchSourceFileSystemObject
        /// By file name: the inode the source watches and the source.
        var files: [String: (inode: UInt64, source: any DispatchSourceFileSystemObject)] = [:]
    }

    func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        guard state.native.directories.count < nativeWatchLimit else { return .unavailable }
        let descriptor = open(directory, O_EVTONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case EMFILE, ENFILE: return .unavailable
            case ENOENT, ENOTDIR:
                return .failed(MirrorError(.notFound, "no directory to watch at \(directory)", file: directory))
            default: return .failed(MirrorError.posix(code, "open", file: directory))
            }
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = MirrorError.posix(errno, "fstat", file: directory)
            close(descriptor)
            return .failed(error)
        }
        let source = makeSource(
            descriptor, events: [.write, .link, .delete, .rename, .revoke, .attrib]
        ) { [weak self] in
            self?.directoryFired(directory)
        }
        var watched = WatchedDirectory(inode: UInt64(info.st_ino), source: source)
        refreshFileSources(of: directory, in: &watched)
        state.native.directories[directory] = watched
        source.resume()
        return .watching
    }

    func removeNative(_ directory: String, state: inout State) {
        guard let watched = state.native.directories.removeValue(forKey: directory) else { return }
        watched.source.cancel()
        for file in watched.files.values { file.source.cancel() }
    }

    func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        defer { state.native = NativeState() }
        return state.native.directories.values.flatMap { watched in
            [watched.source as any DispatchSourceProtocol] + watched.files.values.map(\.source)
        }
    }

    /// Makes a vnode source on `descriptor` that closes it when cancelled. Not yet resumed.
    private func makeSource(
        _ descriptor: Int32, events: DispatchSource.FileSystemEvent,
        handler: @escaping @Sendable () -> Void
    ) -> any DispatchSourceFileSystemObject {
        let source = DispatchSource.makeFileSystemObjectSource(
            fileDescriptor: descriptor, eventMask: events, queue: queue)
        source.setEventHandler { handler() }
        let group = openSources
        source.setCancelHandler {
            close(descriptor)
            group.leave()
        }
        group.enter()
        return source
    }

    /// Opens a source on each file of the directory that has none, or whose name now names
    /// another inode, and cancels those of files that are gone. Called with the lock held.
    private func refreshFileSources(of directory: String, in watched: inout WatchedDirectory) {
        let listing = DirectorySnapshot.take(directory, ignoring: ignoredNames)
        for (name, old) in watched.files where listing.files[name]?.inode != old.inode {
            old.source.cancel()
            watched.files[name] = nil
        }
        for (name, stamp) in listing.files where watched.files[name] == nil && stamp.isRegularFile {
            let descriptor = open(directory + "/" + name, O_EVTONLY | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else { continue }  // gone again; the directory fires
            var info = stat()
            guard fstat(descriptor, &info) == 0 else {
                close(descriptor)
                continue
            }
            let source = makeSource(descriptor, events: [.write, .extend, .attrib, .delete, .rename]) {
                [weak self] in
                self?.directoryFired(directory)
            }
            watched.files[name] = (UInt64(info.st_ino), source)
            source.resume()
        }
    }

    /// The directory or one of its files changed: follow files renamed over others, then
    /// report, so that appends after the receiver's catch-up are seen. On `queue`.
    private func directoryFired(_ directory: String) {
        state.withLock { state in
            guard state.directories[directory] == .native,
                  var watched = state.native.directories[directory] else { return }
            var info = stat()
            guard lstat(directory, &info) == 0, UInt64(info.st_ino) == watched.inode else {
                // The directory itself went away or moved: poll its path from now on.
                fallBackToPolling([directory], state: &state)
                return
            }
            refreshFileSources(of: directory, in: &watched)
            state.native.directories[directory] = watched
        }
        deliver([directory])
    }
}
#endif
