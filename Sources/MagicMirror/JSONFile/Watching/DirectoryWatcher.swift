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
/// - **Linux**: one inotify instance for the whole process, shared by every watcher
///   (``InotifyHub``: the kernel allows a user only 128 instances by default), one watch per
///   directory (`IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE |
///   IN_MOVED_FROM | IN_ATTRIB`, and `IN_DELETE_SELF | IN_MOVE_SELF` to learn that the watch
///   broke, with `IN_ONLYDIR`), read on a dispatch source. A queue overflow reports every
///   directory of every watcher in the process, and moves to polling any whose path no longer
///   leads to its watch.
/// - **macOS**: a kqueue vnode source (`O_EVTONLY`) on each directory, which fires when
///   entries are added, removed or renamed, plus one on each file in it, which fires on
///   appends; the file sources are reopened whenever the directory fires, so a file renamed
///   over another is followed.
/// - **Polling**, the fallback: every `pollInterval`, compare each file's inode, size,
///   modification and change times with the previous look; a file changed within 50 ms
///   of the previous look counts as changed again, since file times tick coarsely on some
///   systems and a write in place keeps the size. Used for every directory when
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
/// > watcher opened is closed (the process's one inotify instance stays open, for other
/// > watchers, with none of this watcher's watches). Deallocating the watcher cancels it.
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

    #if canImport(Glibc)
    /// Runs `body` while the process's inotify instance is not read, so that its events wait
    /// in the kernel's queue, as behind a busy process, and may overflow it: for tests.
    package static func withNativeEventsHeld<Value>(_ body: () throws -> Value) rethrows -> Value {
        try InotifyHub.shared.withReadingHeld(body)
    }
    #endif

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

