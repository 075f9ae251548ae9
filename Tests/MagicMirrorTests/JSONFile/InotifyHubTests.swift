import Foundation
import MirrorTestSupport
import Synchronization
import Testing

@testable import MagicMirror

/// The process's inotify hub, which shares one inotify instance and one watch per directory
/// between the directory watchers of the process: overflows, deleted directories, and
/// watches added and removed concurrently.
@Suite(.timeLimit(.minutes(5))) struct InotifyHubTests {
    #if canImport(Glibc)
    /// A watched directory deleted while the process's inotify queue overflows (its
    /// deletion read in the same batch as the overflow, or lost in it) falls back to
    /// polling, and is noticed when it comes back.
    @Test(arguments: ["before", "after"])
    func aDirectoryDeletedAroundAnOverflowIsNoticedWhenItComesBack(_ when: String) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let result = try await MirrorWorkerRun.run(["watcher-overflow-deleted", temporary.path, when])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "polling noticed")
    }

    /// Watchers sharing one watch, cancelled one by one while the directory keeps changing:
    /// after `cancel()` returns, the handler of the cancelled watcher is not running and
    /// is not called again, and the others still hear of the changes.
    @Test func noHandlerRunsAfterCancelWhileASharedWatchIsBusy() async throws {
        final class Watch: Sendable {
            struct State { var cancelled = Set<Int>(); var running = [Int: Int](); var late = 0; var heard = 0 }
            let state = Mutex(State())
        }
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = temporary.path + "/Busy"
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        let count = 24
        let watch = Watch()
        var watchers: [DirectoryWatcher] = []
        for index in 0..<count {
            let watcher = DirectoryWatcher(method: .native) { _ in
                watch.state.withLock { state in
                    state.running[index, default: 0] += 1
                    state.heard += 1
                    if state.cancelled.contains(index) { state.late += 1 }
                }
                usleep(200)
                watch.state.withLock { state in
                    if state.cancelled.contains(index) { state.late += 1 }
                    state.running[index, default: 0] -= 1
                }
            }
            try watcher.add(zone)
            watchers.append(watcher)
        }
        // A watcher never cancelled paces the test: the hub hands events to the watchers of a
        // directory in order, so once it heard an event, every handler for the events before
        // it has run or been dropped.
        let sentinelHeard = DispatchSemaphore(value: 0)
        let sentinel = DirectoryWatcher(method: .native) { _ in sentinelHeard.signal() }
        defer { sentinel.cancel() }
        try sentinel.add(zone)
        func nextEvent() async -> Bool {
            while sentinelHeard.wait(timeout: .now()) == .success {}
            return await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: sentinelHeard.wait(timeout: .now() + 60) == .success)
                }
            }
        }
        let stop = Atomic<Bool>(false)
        let writer = Thread {
            var round = 0
            while !stop.load(ordering: .relaxed) {
                round += 1
                _ = FileManager.default.createFile(atPath: zone + "/f\(round % 5)", contents: Data("\(round)".utf8))
                usleep(100)
            }
        }
        writer.start()
        for index in 0..<count {
            // Each cancel while events arrive, one at least since the last cancel.
            #expect(await nextEvent(), "no event within 60 s")
            if index % 3 == 0 { watchers[index].remove(zone) }
            watchers[index].cancel()
            watch.state.withLock { state in
                #expect(state.running[index, default: 0] == 0, "watcher \(index)")
                state.cancelled.insert(index)
            }
        }
        // Events after the last cancel: a handler late for an event before it has run by now.
        #expect(await nextEvent(), "no event within 60 s")
        #expect(await nextEvent(), "no event within 60 s")
        stop.store(true, ordering: .relaxed)
        watch.state.withLock { state in
            #expect(state.late == 0)
            #expect(state.heard > count)
        }
    }

    /// Two watchers sharing one watch, one ignoring a name: each is told by its own rule.
    /// One watcher watching the directory under two paths keeps hearing of it under the
    /// other when one is removed. The directory deleted: every watcher polls it (both paths)
    /// and hears of it coming back.
    @Test func aSharedWatchFiltersByWatcherAndBreaksForEveryUser() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = temporary.path + "/Shared"
        let alias = zone + "/."
        let other = temporary.path + "/Other"
        for directory in [zone, other] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        func make(_ ignoring: Set<String>) -> (DirectoryWatcher, EventRecorder<String>) {
            let recorder = EventRecorder<String>()
            let watcher = DirectoryWatcher(method: .native, pollInterval: .milliseconds(20), ignoring: ignoring) {
                recorder.record($0)
            }
            return (watcher, recorder)
        }
        let (ignoring, ignoringEvents) = make(["lock"])
        let (plain, plainEvents) = make([])
        try ignoring.add(zone)
        try ignoring.add(other)
        try plain.add(zone)
        try plain.add(alias)
        try Data().write(to: URL(fileURLWithPath: zone + "/lock"))
        #expect(await plainEvents.wait(for: zone))
        #expect(await plainEvents.wait(for: alias))
        try Data().write(to: URL(fileURLWithPath: other + "/mark"))
        #expect(await ignoringEvents.wait(for: other))
        #expect(ignoringEvents.count(zone) == 0, "the ignored name is not reported")

        plain.remove(zone)
        let aliasSeen = plainEvents.count(alias)
        let zoneSeen = plainEvents.count(zone)
        try Data("x".utf8).write(to: URL(fileURLWithPath: zone + "/journal"))
        #expect(await plainEvents.wait(for: alias, count: aliasSeen + 1))
        #expect(await ignoringEvents.wait(for: zone))
        #expect(plainEvents.count(zone) == zoneSeen)

        try FileManager.default.removeItem(atPath: zone)
        for _ in 0..<300 where ignoring.method(for: zone) != .polling || plain.method(for: alias) != .polling {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(ignoring.method(for: zone) == .polling && plain.method(for: alias) == .polling)
        let seen = (ignoringEvents.count(zone), plainEvents.count(alias))
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        try Data("y".utf8).write(to: URL(fileURLWithPath: zone + "/journal"))
        #expect(await ignoringEvents.wait(for: zone, count: seen.0 + 1))
        #expect(await plainEvents.wait(for: alias, count: seen.1 + 1))
        ignoring.cancel()
        plain.cancel()
    }

    /// Watchers added, removed and cancelled from many threads at once on a few shared
    /// directories, some deleted and made again meanwhile: once every watcher is cancelled
    /// the kernel watches no directory (none leaked), and while one watcher is left on a
    /// directory it still hears of it (its watch was not removed under it).
    @Test func sharedWatchesAddedAndRemovedConcurrentlyAreNeitherLeakedNorLost() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zones = (0..<4).map { temporary.path + "/Z\($0)" }
        for zone in zones { try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true) }
        let keeperEvents = EventRecorder<String>()
        let keeper = DirectoryWatcher(method: .native) { keeperEvents.record($0) }
        try keeper.add(zones[0])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<60 {
                let watcher = DirectoryWatcher(method: .native, ignoring: round % 2 == 0 ? ["x"] : []) { _ in }
                for zone in zones.shuffled() { try? watcher.add(zone) }
                try? watcher.add(zones[round % 4] + "/.")
                // May fail while zones[3] is deleted: fine.
                _ = FileManager.default.createFile(atPath: zones[round % 4] + "/f\(thread)", contents: Data())
                if round % 3 == 0 { watcher.remove(zones[(round + thread) % 4]) }
                if thread == 7, round % 10 == 0 {
                    try? FileManager.default.removeItem(atPath: zones[3])
                    try? FileManager.default.createDirectory(atPath: zones[3], withIntermediateDirectories: true)
                }
                if round % 2 == 0 { watcher.cancel() }
            }
        }
        let seen = keeperEvents.count(zones[0])
        try Data("k".utf8).write(to: URL(fileURLWithPath: zones[0] + "/keeper"))
        #expect(await keeperEvents.wait(for: zones[0], count: seen + 1))
        #expect(keeper.method(for: zones[0]) == .native)
        keeper.cancel()
        // Every watcher is cancelled (or gone, which cancels it): each watch goes with its
        // last user. Waited for, up to a minute, rather than for a set time.
        var watched = zones
        for _ in 0..<6_000 {
            watched = try zones.filter { try DirectoryWatcherTests.isWatchedByInotify($0) }
            if watched.isEmpty { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(watched.isEmpty, "still watched: \(watched)")
    }

    #endif
}
