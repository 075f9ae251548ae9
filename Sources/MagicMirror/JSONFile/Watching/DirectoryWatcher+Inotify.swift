import Dispatch
import Foundation
import Synchronization

// Linux: one inotify instance for the whole process (InotifyHub), one watch per directory.

#if canImport(Glibc)
extension DirectoryWatcher.Core {
    /// The directories this watcher watches through the process's inotify instance.
    struct NativeState: ~Copyable {
        /// Watch descriptor → the directories it watches (several paths may name one
        /// directory, and inotify returns one watch for them).
        var directoriesByWatch: [Int32: Set<String>] = [:]
        var watchByDirectory: [String: Int32] = [:]
    }

    private static let watchMask = UInt32(
        IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM
            | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        guard state.native.directoriesByWatch.count < nativeWatchLimit else { return .unavailable }
        switch InotifyHub.shared.addWatch(directory, mask: Self.watchMask, for: self) {
        case .noInstance:
            return .unavailable  // e.g. EMFILE: the instance limit
        case .failed(let code):
            switch code {
            case ENOSPC, ENOMEM: return .unavailable  // the watch limit
            case ENOENT, ENOTDIR:
                return .failed(MirrorError(.notFound, "no directory to watch at \(directory)", file: directory))
            default: return .failed(MirrorError.posix(code, "inotify_add_watch", file: directory))
            }
        case .watching(let watch):
            state.native.directoriesByWatch[watch, default: []].insert(directory)
            state.native.watchByDirectory[directory] = watch
            return .watching
        }
    }

    func removeNative(_ directory: String, state: inout State) {
        guard let watch = state.native.watchByDirectory.removeValue(forKey: directory) else { return }
        state.native.directoriesByWatch[watch]?.remove(directory)
        if state.native.directoriesByWatch[watch]?.isEmpty == true {
            state.native.directoriesByWatch[watch] = nil
        }
        InotifyHub.shared.removeWatch(watch, for: self)
    }

    /// Gives up every native watch of this watcher. The process's inotify instance stays
    /// open for other watchers: there is no source of this watcher's own to cancel.
    func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        for (watch, directories) in state.native.directoriesByWatch {
            for _ in directories { InotifyHub.shared.removeWatch(watch, for: self) }
        }
        state.native = NativeState()
        return []
    }

    /// Reports the directories of the events the process's inotify instance read for this
    /// watcher. On `queue`.
    ///
    /// - Parameters:
    ///   - changed: The watches with an event on a file whose name is not ignored.
    ///   - broken: The watches that broke (their directory was deleted or moved).
    ///   - overflowed: Whether events were lost: every natively watched directory is reported.
    func nativeEvents(changed: Set<Int32>, broken: Set<Int32>, overflowed: Bool) {
        let reported: [String] = state.withLock { state in
            // A watch that broke was not removed by us: its directories are reported and
            // polled from now on, which notices them coming back.
            let reported: [String]
            let brokenDirectories: [String]
            if overflowed {
                // Lost events may include a watch breaking (its directory deleted or moved,
                // and maybe back already): a directory whose path no longer leads to its
                // watch broke.
                reported = state.directories.filter { $0.value == .native }.map(\.key)
                brokenDirectories = reported.filter { directory in
                    guard let watch = state.native.watchByDirectory[directory] else { return true }
                    return !InotifyHub.shared.isWatching(directory, by: watch, mask: Self.watchMask)
                }
            } else {
                brokenDirectories = broken.flatMap { state.native.directoriesByWatch[$0] ?? [] }
                reported = changed.flatMap { state.native.directoriesByWatch[$0] ?? [] } + brokenDirectories
            }
            fallBackToPolling(brokenDirectories, state: &state)
            return reported
        }
        deliver(reported)
    }
}

/// The process's one inotify instance, shared by every ``DirectoryWatcher``.
///
/// The kernel allows each user 128 inotify instances by default (`max_user_instances`),
/// across all of their processes, and watches are counted apart (`max_user_watches`, in
/// the hundreds of thousands). A process that opened an instance per watcher (one per
/// database) ran out with a hundred databases open, and then polled. Here every watcher's
/// watches are in one instance: it is opened on first use and stays open for the life of
/// the process; if it cannot be opened, the next watch tries again.
///
/// inotify gives one watch descriptor per directory per instance, so two watchers of one
/// directory share it: the hub counts who uses each watch and removes it from the kernel
/// when the last user gives it up. A watch the kernel dropped (its directory was deleted)
/// is given up the same way, by its users falling back to polling; removing it again then
/// fails harmlessly, as the kernel does not reuse watch descriptors (it allocates them
/// cyclically). Events are read on the hub's queue and handed to each watcher on its own
/// queue (``DirectoryWatcher/Core/nativeEvents(changed:broken:overflowed:)``), filtered by
/// the names it ignores.
final class InotifyHub: Sendable {
    static let shared = InotifyHub()

    private let queue = DispatchQueue(label: "MagicMirror.InotifyHub")

    /// A watcher using a watch, and how many of its directories do.
    private struct User {
        weak var core: DirectoryWatcher.Core?
        var count: Int
    }

    private struct State {
        /// The inotify descriptor; -1 until it is open.
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        /// The users of each watch descriptor.
        var users: [Int32: [ObjectIdentifier: User]] = [:]
    }

    private let state = Mutex(State())

    /// What asking for a watch gave.
    enum WatchOutcome {
        /// The directory is watched by this watch descriptor.
        case watching(Int32)
        /// `inotify_add_watch` failed with this `errno`.
        case failed(Int32)
        /// The process has no inotify instance and cannot open one.
        case noInstance
    }

    /// Watches `directory` for `core`.
    func addWatch(_ directory: String, mask: UInt32, for core: DirectoryWatcher.Core) -> WatchOutcome {
        state.withLock { state in
            if state.descriptor < 0 {
                guard let (descriptor, source) = start() else { return .noInstance }
                state.descriptor = descriptor
                state.source = source
            }
            let watch = inotify_add_watch(state.descriptor, directory, mask)
            guard watch >= 0 else { return .failed(errno) }
            state.users[watch, default: [:]][ObjectIdentifier(core), default: User(core: core, count: 0)].count += 1
            return .watching(watch)
        }
    }

    /// Gives up one use of `watch` by `core`; the kernel's watch is removed with its last use.
    func removeWatch(_ watch: Int32, for core: DirectoryWatcher.Core) {
        state.withLock { state in
            let key = ObjectIdentifier(core)
            guard var user = state.users[watch]?[key] else { return }
            user.count -= 1
            state.users[watch]?[key] = user.count > 0 ? user : nil
            if state.users[watch]?.isEmpty == true {
                state.users[watch] = nil
                // The kernel then queues IN_IGNORED for the watch, which finds no user.
                _ = inotify_rm_watch(state.descriptor, watch)
            }
        }
    }

    /// Whether `watch` is still the kernel's watch of the directory at `directory` (asked
    /// again: the kernel returns the watch the directory has, or makes one, removed here
    /// unless another watcher uses it).
    func isWatching(_ directory: String, by watch: Int32, mask: UInt32) -> Bool {
        state.withLock { state in
            guard state.descriptor >= 0 else { return false }
            let found = inotify_add_watch(state.descriptor, directory, mask)
            if found == watch { return true }
            if found >= 0, state.users[found] == nil { _ = inotify_rm_watch(state.descriptor, found) }
            return false
        }
    }

    /// Runs `body` while the instance is not read: its events wait in the kernel's queue,
    /// which may overflow.
    func withReadingHeld<Value>(_ body: () throws -> Value) rethrows -> Value {
        let source = state.withLock { $0.source }
        source?.suspend()
        defer { source?.resume() }
        return try body()
    }

    /// Opens the instance and starts reading it.
    private func start() -> (Int32, any DispatchSourceRead)? {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { self.readEvents(from: descriptor) }
        source.resume()
        return (descriptor, source)
    }

    /// What one read of the queue found for one watch.
    private struct WatchEvents {
        /// The names of the files the events were about.
        var names: Set<String> = []
        /// Whether an event named no file (about the directory itself).
        var unnamed = false
        var broken = false
    }

    /// Reads every queued event and hands each watcher the events of its watches. On `queue`.
    private func readEvents(from descriptor: Int32) {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: bufferSize, alignment: MemoryLayout<inotify_event>.alignment)
        defer { buffer.deallocate() }
        var events: [Int32: WatchEvents] = [:]
        var overflowed = false
        while true {
            let count = read(descriptor, buffer.baseAddress, bufferSize)
            if count < 0 {
                if errno == EINTR { continue }
                break  // EAGAIN: drained
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
                } else if mask & UInt32(IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF) != 0 {
                    events[watch, default: WatchEvents()].broken = true
                } else if nameLength > 0, offset <= count {
                    let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[nameStart..<offset])
                    // A file with no name in the directory (`O_TMPFILE`, which the kernel
                    // calls `#<inode>`: a spill of another reader) changes none of its files.
                    if nameBytes.first == UInt8(ascii: "#") { continue }
                    events[watch, default: WatchEvents()].names.insert(
                        String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self))
                } else {
                    events[watch, default: WatchEvents()].unnamed = true
                }
            }
        }
        // Each watcher's share, found under the lock and handed over after it.
        var shares: [ObjectIdentifier: (core: DirectoryWatcher.Core, changed: Set<Int32>, broken: Set<Int32>)] = [:]
        state.withLock { state in
            if overflowed {
                for users in state.users.values {
                    for (key, user) in users { if let core = user.core { shares[key] = (core, [], []) } }
                }
            }
            for (watch, found) in events {
                for (key, user) in state.users[watch] ?? [:] {
                    guard let core = user.core else { continue }
                    var share = shares[key] ?? (core, [], [])
                    if found.broken {
                        share.broken.insert(watch)
                    } else if found.unnamed || !found.names.isSubset(of: core.ignoredNames) {
                        share.changed.insert(watch)
                    } else {
                        continue  // only names it ignores (a lock file): nothing to hand over
                    }
                    shares[key] = share
                }
            }
        }
        let lost = overflowed
        for share in shares.values {
            let core = share.core
            core.queue.async {
                core.nativeEvents(changed: share.changed, broken: share.broken, overflowed: lost)
            }
        }
    }
}
#endif
