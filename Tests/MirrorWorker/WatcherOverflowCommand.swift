import Dispatch
import Foundation
import MagicMirror

/// `mirror-worker watcher-overflow <directory>`: watches two directories in `<directory>`
/// natively, overflows the kernel's event queue with changes to one of them while the
/// process's inotify instance is not read, and prints `reported` once the other, untouched
/// one is reported (what an overflow does: every directory is reported, since any may have
/// changed). Linux only.
///
/// In a process of its own because an overflow of the process's one inotify instance
/// reaches every watcher in the process: those of tests running beside it would hear of
/// changes they did not make.
enum WatcherOverflowCommand {
    static func run(_ arguments: [String]) async throws {
        #if canImport(Glibc)
        guard let root = arguments.first else { throw WorkerUsageError("watcher-overflow <directory>") }
        let setup = try Setup(root: root, other: "Quiet")
        // Nothing is read while the queue fills up.
        try DirectoryWatcher.withNativeEventsHeld { try overflow(setup.busy) }
        guard setup.otherReported.wait(timeout: .now() + 60) == .success else {
            throw WorkerUsageError("the untouched directory was not reported after the overflow")
        }
        setup.watcher.cancel()
        print("reported")
        #else
        throw WorkerUsageError("watcher-overflow runs on Linux only")
        #endif
    }

    /// A native watcher of two new directories of `root`, `Busy` (with files `a` and `b`,
    /// for ``overflow(_:)``) and `other`, once it has reported `Busy`.
    struct Setup {
        let watcher: DirectoryWatcher
        let busy: String
        let other: String
        /// Signalled for every report of `other`.
        let otherReported: DispatchSemaphore

        init(root: String, other name: String, pollInterval: Duration = .milliseconds(250)) throws {
            busy = root + "/Busy"
            other = root + "/" + name
            for directory in [busy, other] {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            let busyReported = DispatchSemaphore(value: 0)
            let otherReported = DispatchSemaphore(value: 0)
            self.otherReported = otherReported
            let other = self.other
            watcher = DirectoryWatcher(method: .native, pollInterval: pollInterval) { directory in
                (directory == other ? otherReported : busyReported).signal()
            }
            try watcher.add(busy)
            try watcher.add(other)
            try Data("start".utf8).write(to: URL(fileURLWithPath: busy + "/a"))
            try Data().write(to: URL(fileURLWithPath: busy + "/b"))
            guard busyReported.wait(timeout: .now() + 60) == .success else {
                throw WorkerUsageError("the busy directory was not reported")
            }
        }
    }

    /// Writes more events into `directory`'s files `a` and `b` (which must exist) than the
    /// kernel's inotify queue holds, alternating the two files: inotify merges identical
    /// consecutive events.
    static func overflow(_ directory: String) throws {
        let limit = Int((try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 16384
        guard limit <= 1_000_000 else { throw WorkerUsageError("the inotify queue is too long to overflow") }
        let a = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/a"))
        let b = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/b"))
        for _ in 0...(limit / 2 + 16) {
            try a.write(contentsOf: Data("x".utf8))
            try b.write(contentsOf: Data("y".utf8))
        }
        try a.close()
        try b.close()
    }
}
