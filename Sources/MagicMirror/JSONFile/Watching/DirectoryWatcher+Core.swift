import Dispatch
import Foundation
import Synchronization

extension DirectoryWatcher {
    /// The watcher's state and event sources. Separate from ``DirectoryWatcher`` so that
    /// the sources' handlers can refer to it weakly and the watcher's `deinit` can cancel it.
    final class Core: Sendable {
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
            // in progress; waiting from the queue itself would deadlock. Events handed over
            // by the process's inotify instance (Linux) run on `queue` too: the empty block
            // waits for one in progress, and those after it find the watcher cancelled.
            if DispatchQueue.getSpecific(key: onQueueKey) != true {
                openSources.wait()
                queue.sync {}
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

extension DirectoryWatcher.Core {
    /// The result of starting a native watch on a directory.
    enum NativeWatchResult {
        /// The directory is watched.
        case watching
        /// The platform cannot watch it (no mechanism, or a limit reached): poll it instead.
        case unavailable
        /// The directory cannot be watched at all.
        case failed(MirrorError)
    }
}
