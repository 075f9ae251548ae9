#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Synchronization

/// Watches directories for changes to the files in them and calls a handler with the
/// directory that changed.
///
/// The JSON-file database watches its zone directories with one to notice commits by other
/// processes. It watches *directories*, not files: compaction renames a new snapshot and
/// journal over the old ones, and a watch on a file would stay on the replaced inode.
///
/// - **Linux**: one inotify instance per watcher, one watch per directory
///   (`IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
///   IN_ATTRIB`), read on a dispatch source. A queue overflow reports every directory.
/// - **macOS**: a kqueue vnode source (`O_EVTONLY`) on each directory, which fires when
///   entries are added, removed or renamed, plus one on each file in it, which fires on
///   appends; the file sources are reopened whenever the directory fires, so a file renamed
///   over another is followed.
/// - **Polling**, the fallback: every `pollInterval`, compare each file's inode, size,
///   modification and change times with the previous look. Used for every directory when
///   ``Method/polling`` is asked for, when the platform mechanism cannot start (for example
///   `inotify_init1` fails), or for the directories it cannot watch (the inotify watch limit
///   is reached). A directory whose native watch breaks (it is deleted or moved) is polled
///   from then on.
///
/// The handler runs on the watcher's own serial queue, never concurrently with itself, once
/// per changed directory per batch of events (several changes close together may be
/// reported once). A call is a hint that something changed, never a description of what:
/// spurious calls are possible, and the receiver re-reads the directory.
///
/// > Important: A change made after ``add(_:)`` returns is reported at least once while the
/// > directory is watched. After ``cancel()`` returns (called from outside the handler),
/// > the handler is not running and is not called again, and every file descriptor the
/// > watcher opened is closed. Deallocating the watcher cancels it.
package final class DirectoryWatcher: Sendable {
    /// How directories are watched.
    package enum Method: Sendable, Hashable, CustomStringConvertible {
        /// The platform's notification mechanism (inotify, kqueue), falling back to polling
        /// where it is unavailable.
        case native
        /// A `stat` poll on a timer.
        case polling

        package var description: String { self == .native ? "native" : "polling" }
    }

    private let core: Core

    /// Creates a watcher that watches no directory yet.
    ///
    /// - Parameters:
    ///   - method: ``Method/native`` (the default) or ``Method/polling``.
    ///   - pollInterval: How often polled directories are looked at.
    ///   - ignoredNames: File names whose changes are not reported (for example a lock file
    ///     that writers open and close).
    ///   - nativeWatchLimit: The most directories watched natively; further ones are polled.
    ///     The system's own limits (the inotify watch limit, open files) apply too.
    ///   - handler: Called with the path of a directory (as passed to ``add(_:)``) when
    ///     something in it changed.
    package init(
        method: Method = .native,
        pollInterval: Duration = .milliseconds(250),
        ignoring ignoredNames: Set<String> = [],
        nativeWatchLimit: Int = .max,
        handler: @escaping @Sendable (String) -> Void
    ) {
        core = Core(
            method: method, pollInterval: pollInterval, ignoredNames: ignoredNames,
            nativeWatchLimit: nativeWatchLimit, handler: handler)
    }

    deinit { core.cancel() }

    /// Starts watching a directory. Adding a directory that is already watched does nothing.
    ///
    /// - Parameter directory: The path of an existing directory.
    /// - Throws: ``MirrorError/Kind/notFound`` when it does not exist or is not a directory,
    ///   another ``MirrorError`` when it cannot be read, ``MirrorError/Kind/cancelled``
    ///   after ``cancel()``.
    package func add(_ directory: String) throws(MirrorError) {
        try core.add(directory)
    }

    /// Stops watching a directory; no call for it starts after this returns. Removing a
    /// directory that is not watched does nothing.
    package func remove(_ directory: String) {
        core.remove(directory)
    }

    /// The directories being watched.
    package var directories: Set<String> { core.directories }

    /// How a directory is being watched, or `nil` when it is not.
    package func method(for directory: String) -> Method? { core.method(for: directory) }

    /// Stops watching every directory and closes every file descriptor.
    ///
    /// When called from outside the handler it returns once the handler is no longer
    /// running and every descriptor is closed; called from the handler, the descriptors
    /// are closed as soon as the handler returns. Calling it again does nothing.
    package func cancel() { core.cancel() }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { core.isCancelled }
}

// MARK: - Core

extension DirectoryWatcher {
    /// The watcher's state and event sources. Separate from ``DirectoryWatcher`` so that
    /// the sources' handlers can refer to it weakly and the watcher's `deinit` can cancel it.
    fileprivate final class Core: Sendable {
        let method: Method
        let pollInterval: Duration
        let ignoredNames: Set<String>
        let nativeWatchLimit: Int
        let handler: @Sendable (String) -> Void
        let queue = DispatchQueue(label: "MagicMirror.DirectoryWatcher")
        /// Set on `queue`, to recognise calls made from the handler.
        let onQueueKey = DispatchSpecificKey<Bool>()
        /// Entered for every dispatch source made, left by its cancel handler (which closes
        /// its descriptor), so `cancel()` can wait until every descriptor is closed.
        let openSources = DispatchGroup()
        let state = Mutex(State())

        init(
            method: Method, pollInterval: Duration, ignoredNames: Set<String>,
            nativeWatchLimit: Int, handler: @escaping @Sendable (String) -> Void
        ) {
            self.nativeWatchLimit = nativeWatchLimit
            self.method = method
            self.pollInterval = pollInterval
            self.ignoredNames = ignoredNames
            self.handler = handler
            queue.setSpecific(key: onQueueKey, value: true)
        }

        struct State: ~Copyable {
            var isCancelled = false
            /// Every watched directory and how.
            var directories: [String: Method] = [:]
            var native = NativeState()
            var poll = PollState()
        }

        var isCancelled: Bool { state.withLock { $0.isCancelled } }
        var directories: Set<String> { state.withLock { Set($0.directories.keys) } }
        func method(for directory: String) -> Method? {
            state.withLock { $0.directories[directory] }
        }

        func add(_ directory: String) throws(MirrorError) {
            try Self.checkIsDirectory(directory)
            let started: Result<Void, MirrorError> = state.withLock { state in
                if state.isCancelled {
                    return .failure(MirrorError(
                        .cancelled, "the directory watcher was cancelled", file: directory))
                }
                if state.directories[directory] != nil { return .success(()) }
                if method == .native {
                    switch addNative(directory, state: &state) {
                    case .watching:
                        state.directories[directory] = .native
                        return .success(())
                    case .unavailable:
                        break  // poll it below
                    case .failed(let error):
                        return .failure(error)
                    }
                }
                addPolled(directory, state: &state)
                state.directories[directory] = .polling
                return .success(())
            }
            try started.get()
        }

        func remove(_ directory: String) {
            state.withLock { state in
                guard let method = state.directories.removeValue(forKey: directory) else { return }
                switch method {
                case .native: removeNative(directory, state: &state)
                case .polling: removePolled(directory, state: &state)
                }
            }
        }

        func cancel() {
            let sources: [any DispatchSourceProtocol] = state.withLock { state in
                if state.isCancelled { return [] }
                state.isCancelled = true
                state.directories = [:]
                let native = takeNativeSources(&state)
                return native + takePollSources(&state)
            }
            for source in sources { source.cancel() }
            // The cancel handlers close the descriptors on `queue`, after any event handler
            // in progress; waiting from the queue itself would deadlock.
            if DispatchQueue.getSpecific(key: onQueueKey) != true {
                openSources.wait()
            }
        }

        /// Calls the handler for each directory still watched, unless cancelled. On `queue`.
        func deliver(_ changed: some Sequence<String>) {
            for directory in Set(changed).sorted() {
                let watched = state.withLock { !$0.isCancelled && $0.directories[directory] != nil }
                if watched { handler(directory) }
            }
        }

        /// Moves directories whose native watch broke to polling. Called with the lock held.
        func fallBackToPolling(_ directories: some Sequence<String>, state: inout State) {
            for directory in directories where state.directories[directory] == .native {
                removeNative(directory, state: &state)
                addPolled(directory, state: &state)
                state.directories[directory] = .polling
            }
        }

        static func checkIsDirectory(_ path: String) throws(MirrorError) {
            var info = stat()
            guard stat(path, &info) == 0 else {
                let code = errno
                if code == ENOENT || code == ENOTDIR {
                    throw MirrorError(.notFound, "no directory to watch at \(path)", file: path)
                }
                throw MirrorError.posix(code, "stat", file: path)
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw MirrorError(.notFound, "\(path) is not a directory", file: path)
            }
        }
    }
}

/// The result of starting a native watch on a directory.
private enum NativeWatchResult {
    /// The directory is watched.
    case watching
    /// The platform cannot watch it (no mechanism, or a limit reached): poll it instead.
    case unavailable
    /// The directory cannot be watched at all.
    case failed(MirrorError)
}

// MARK: - Linux: inotify

#if canImport(Glibc)
extension DirectoryWatcher.Core {
    /// The inotify instance and its watches.
    struct NativeState: ~Copyable {
        /// Whether `inotify_init1` was tried.
        var started = false
        /// The inotify descriptor; -1 when it is not open.
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        /// Watch descriptor → the directories it watches (several paths may name one
        /// directory, and inotify returns one watch for them).
        var directoriesByWatch: [Int32: Set<String>] = [:]
        var watchByDirectory: [String: Int32] = [:]
    }

    private static let watchMask = UInt32(
        IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM
            | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    fileprivate func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        if !state.native.started {
            state.native.started = true
            startInotify(&state.native)
        }
        let descriptor = state.native.descriptor
        guard descriptor >= 0, state.native.directoriesByWatch.count < nativeWatchLimit else {
            return .unavailable
        }
        let watch = inotify_add_watch(descriptor, directory, Self.watchMask)
        guard watch >= 0 else {
            let code = errno
            switch code {
            case ENOSPC, ENOMEM: return .unavailable  // the watch limit
            case ENOENT, ENOTDIR:
                return .failed(MirrorError(.notFound, "no directory to watch at \(directory)", file: directory))
            default: return .failed(MirrorError.posix(code, "inotify_add_watch", file: directory))
            }
        }
        state.native.directoriesByWatch[watch, default: []].insert(directory)
        state.native.watchByDirectory[directory] = watch
        return .watching
    }

    private func startInotify(_ native: inout NativeState) {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return }  // e.g. EMFILE: the instance limit; poll instead
        native.descriptor = descriptor
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.readEvents(from: descriptor) }
        let group = openSources
        source.setCancelHandler {
            close(descriptor)
            group.leave()
        }
        group.enter()
        native.source = source
        source.resume()
    }

    fileprivate func removeNative(_ directory: String, state: inout State) {
        guard let watch = state.native.watchByDirectory.removeValue(forKey: directory) else { return }
        state.native.directoriesByWatch[watch]?.remove(directory)
        if state.native.directoriesByWatch[watch]?.isEmpty == true {
            state.native.directoriesByWatch[watch] = nil
            // The kernel then queues IN_IGNORED for the watch, which finds no directory.
            _ = inotify_rm_watch(state.native.descriptor, watch)
        }
    }

    fileprivate func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        defer { state.native = NativeState() }
        // Cancelling the read source closes the inotify descriptor, which drops every watch.
        return state.native.source.map { [$0] } ?? []
    }

    /// Reads every queued event and reports the directories they name. On `queue`.
    private func readEvents(from descriptor: Int32) {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: bufferSize, alignment: MemoryLayout<inotify_event>.alignment)
        defer { buffer.deallocate() }
        var changedWatches: Set<Int32> = []
        var brokenWatches: Set<Int32> = []
        var overflowed = false
        while true {
            let count = read(descriptor, buffer.baseAddress, bufferSize)
            if count < 0 {
                if errno == EINTR { continue }
                break  // EAGAIN: drained (or the descriptor is going away)
            }
            if count == 0 { break }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let watch = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let nameLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = offset + headerSize
                offset = nameStart + nameLength
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    overflowed = true
                    continue
                }
                if mask & UInt32(IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF) != 0 {
                    brokenWatches.insert(watch)
                    continue
                }
                if nameLength > 0, !ignoredNames.isEmpty, offset <= count {
                    let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[nameStart..<offset])
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if ignoredNames.contains(name) { continue }
                }
                changedWatches.insert(watch)
            }
        }
        let changed: [String] = state.withLock { state in
            if overflowed {
                return state.directories.filter { $0.value == .native }.map(\.key)
            }
            var changed = changedWatches.flatMap { state.native.directoriesByWatch[$0] ?? [] }
            // A watch that broke (the directory was deleted or moved) was not removed by us:
            // report its directories and poll them from now on, which notices them coming back.
            let broken = brokenWatches.flatMap { state.native.directoriesByWatch[$0] ?? [] }
            changed += broken
            fallBackToPolling(broken, state: &state)
            return changed
        }
        deliver(changed)
    }
}
#endif

// MARK: - macOS: kqueue vnode sources

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

    fileprivate func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
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

    fileprivate func removeNative(_ directory: String, state: inout State) {
        guard let watched = state.native.directories.removeValue(forKey: directory) else { return }
        watched.source.cancel()
        for file in watched.files.values { file.source.cancel() }
    }

    fileprivate func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] {
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

#if !canImport(Glibc) && !canImport(Darwin)
extension DirectoryWatcher.Core {
    struct NativeState: ~Copyable {}

    fileprivate func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        .unavailable
    }

    fileprivate func removeNative(_ directory: String, state: inout State) {}

    fileprivate func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] { [] }
}
#endif

// MARK: - Polling

extension DirectoryWatcher.Core {
    /// The polled directories, what they looked like last time, and the timer.
    struct PollState: ~Copyable {
        var snapshots: [String: DirectorySnapshot] = [:]
        var timer: (any DispatchSourceTimer)?
    }

    fileprivate func addPolled(_ directory: String, state: inout State) {
        state.poll.snapshots[directory] = DirectorySnapshot.take(directory, ignoring: ignoredNames)
        guard state.poll.timer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval = DispatchTimeInterval.nanoseconds(Int(Self.nanoseconds(pollInterval)))
        let leeway = DispatchTimeInterval.nanoseconds(Int(Self.nanoseconds(pollInterval) / 10))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: leeway)
        timer.setEventHandler { [weak self] in self?.poll() }
        let group = openSources
        timer.setCancelHandler { group.leave() }
        group.enter()
        state.poll.timer = timer
        timer.resume()
    }

    fileprivate func removePolled(_ directory: String, state: inout State) {
        state.poll.snapshots[directory] = nil
        if state.poll.snapshots.isEmpty, let timer = state.poll.timer {
            state.poll.timer = nil
            timer.cancel()
        }
    }

    fileprivate func takePollSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        defer { state.poll = PollState() }
        return state.poll.timer.map { [$0] } ?? []
    }

    /// Looks at every polled directory and reports those that changed. On `queue`.
    private func poll() {
        let directories = state.withLock { Array($0.poll.snapshots.keys) }
        // Look without the lock: listing and `stat` can be slow.
        let looks = directories.map { ($0, DirectorySnapshot.take($0, ignoring: ignoredNames)) }
        let changed: [String] = state.withLock { state in
            var changed: [String] = []
            for (directory, look) in looks {
                guard let previous = state.poll.snapshots[directory] else { continue }  // removed
                if previous != look {
                    state.poll.snapshots[directory] = look
                    changed.append(directory)
                }
            }
            return changed
        }
        deliver(changed)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1_000_000, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension DirectoryWatcher.Core {
    /// What a directory's files looked like at one moment, to compare with a later look.
    struct DirectorySnapshot: Equatable, Sendable {
        /// What identifies one version of a file's contents and metadata.
        struct FileStamp: Equatable, Sendable {
            var inode: UInt64
            var size: Int64
            var modified: timespec
            var changed: timespec
            var isRegularFile: Bool

            static func == (lhs: FileStamp, rhs: FileStamp) -> Bool {
                lhs.inode == rhs.inode && lhs.size == rhs.size && lhs.isRegularFile == rhs.isRegularFile
                    && lhs.modified.tv_sec == rhs.modified.tv_sec
                    && lhs.modified.tv_nsec == rhs.modified.tv_nsec
                    && lhs.changed.tv_sec == rhs.changed.tv_sec
                    && lhs.changed.tv_nsec == rhs.changed.tv_nsec
            }

            init(_ info: stat) {
                inode = UInt64(info.st_ino)
                size = Int64(info.st_size)
                isRegularFile = (info.st_mode & S_IFMT) == S_IFREG
                #if canImport(Darwin)
                modified = info.st_mtimespec
                changed = info.st_ctimespec
                #else
                modified = info.st_mtim
                changed = info.st_ctim
                #endif
            }
        }

        /// The directory's own inode, or `nil` when it does not exist (a re-created directory
        /// counts as a change).
        var directoryInode: UInt64?
        /// By file name, without the ignored names.
        var files: [String: FileStamp] = [:]

        /// Lists a directory and `lstat`s each entry (symbolic links are not followed).
        static func take(_ directory: String, ignoring ignoredNames: Set<String>) -> DirectorySnapshot {
            var snapshot = DirectorySnapshot()
            var info = stat()
            guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return snapshot }
            snapshot.directoryInode = UInt64(info.st_ino)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
                return snapshot
            }
            for name in names where !ignoredNames.contains(name) {
                var info = stat()
                if lstat(directory + "/" + name, &info) == 0 {
                    snapshot.files[name] = FileStamp(info)
                }
            }
            return snapshot
        }
    }
}
