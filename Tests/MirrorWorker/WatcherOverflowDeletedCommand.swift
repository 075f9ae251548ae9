import Dispatch
import Foundation
import MagicMirror

/// `mirror-worker watcher-overflow-deleted <directory> <before|after>`: watches two
/// directories in `<directory>` natively with one watcher, and while the process's inotify
/// instance is not read deletes one of them (`before` or `after` overflowing the kernel's
/// event queue with changes to the other). Once reading resumes, the deleted directory must
/// fall back to polling (its watch is gone with it), so that it is noticed when it comes
/// back: prints `<method> noticed` or `<method> missed`. Linux only; a process of its own
/// for the reason given in ``WatcherOverflowCommand``.
enum WatcherOverflowDeletedCommand {
    static func run(_ arguments: [String]) async throws {
        #if canImport(Glibc)
        guard arguments.count == 2, ["before", "after"].contains(arguments[1]) else {
            throw WorkerUsageError("watcher-overflow-deleted <directory> <before|after>")
        }
        let deleteFirst = arguments[1] == "before"
        let setup = try WatcherOverflowCommand.Setup(root: arguments[0], other: "Gone", pollInterval: .milliseconds(20))
        let (watcher, busy, gone, goneReported) = (setup.watcher, setup.busy, setup.other, setup.otherReported)
        try DirectoryWatcher.withNativeEventsHeld {
            if deleteFirst { try FileManager.default.removeItem(atPath: gone) }
            try WatcherOverflowCommand.overflow(busy)
            if !deleteFirst { try FileManager.default.removeItem(atPath: gone) }
        }
        guard goneReported.wait(timeout: .now() + 60) == .success else {
            throw WorkerUsageError("the deleted directory was not reported after the overflow")
        }
        // The event this waits for: the deleted directory's watch falling back to polling
        // (reported first, then switched); then the reports so far are dropped.
        let deadline = ContinuousClock.now + .seconds(60)
        while watcher.method(for: gone) != .polling, ContinuousClock.now < deadline {
            _ = goneReported.wait(timeout: .now() + .milliseconds(20))
        }
        while goneReported.wait(timeout: .now()) == .success {}
        let method = watcher.method(for: gone).map(\.description) ?? "none"
        try FileManager.default.createDirectory(atPath: gone, withIntermediateDirectories: true)
        try Data("back".utf8).write(to: URL(fileURLWithPath: gone + "/journal-1.ndjson"))
        let noticed = goneReported.wait(timeout: .now() + 60) == .success
        watcher.cancel()
        print("\(method) \(noticed ? "noticed" : "missed")")
        #else
        throw WorkerUsageError("watcher-overflow-deleted runs on Linux only")
        #endif
    }
}
