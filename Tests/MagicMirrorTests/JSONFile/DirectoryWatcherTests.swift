import Foundation
import MagicMirror
import Testing

/// The directory watcher behind cross-process notifications, with the platform mechanism
/// (inotify / kqueue) and with the `stat` poll fallback.
@Suite(.timeLimit(.minutes(5))) struct DirectoryWatcherTests {
    static let methods: [DirectoryWatcher.Method] = [.native, .polling]
    /// Short, so polled tests are quick; the watcher itself defaults to 250 ms.
    static let pollInterval = Duration.milliseconds(20)

    /// A watcher whose events go to a recorder.
    private func watcher(
        _ method: DirectoryWatcher.Method, ignoring: Set<String> = [], nativeWatchLimit: Int = .max
    ) -> (DirectoryWatcher, EventRecorder<String>) {
        let recorder = EventRecorder<String>()
        let watcher = DirectoryWatcher(
            method: method, pollInterval: Self.pollInterval, ignoring: ignoring,
            nativeWatchLimit: nativeWatchLimit
        ) { recorder.record($0) }
        return (watcher, recorder)
    }

    private func makeDirectory(_ temporary: TemporaryDirectory, _ name: String) throws -> String {
        let path = temporary.path + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    private func append(_ text: String, to path: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    /// Writes a file under a temporary name and renames it over `path`, as compaction does.
    private func replace(_ path: String, with text: String) throws {
        let temporary = path + ".tmp"
        try write(text, to: temporary)
        guard rename(temporary, path) == 0 else { throw POSIXError(.EIO) }
    }

    @Test(arguments: methods)
    func reportsAnAppendToAFile(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        try write("{\"seq\":1}\n", to: zone + "/journal-1.ndjson")
        let (watcher, events) = watcher(method)
        try watcher.add(zone)
        #expect(watcher.method(for: zone) == method)

        try append("{\"seq\":2}\n", to: zone + "/journal-1.ndjson")
        #expect(await events.wait(for: zone))
        #expect(Set(events.events) == [zone])
    }

    @Test(arguments: methods)
    func reportsANewFile(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let (watcher, events) = watcher(method)
        try watcher.add(zone)

        try write("{}\n", to: zone + "/journal-1.ndjson")
        #expect(await events.wait(for: zone))
    }

    /// Compaction renames a new file over the journal: the watch is on the directory, so it
    /// survives, and appends to the new file are reported too.
    @Test(arguments: methods)
    func followsAFileRenamedOverAnother(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let journal = zone + "/journal.ndjson"
        try write("{\"seq\":1}\n", to: journal)
        let (watcher, events) = watcher(method)
        try watcher.add(zone)

        try replace(journal, with: "{\"seq\":1}\n{\"seq\":2}\n")
        #expect(await events.wait(for: zone))
        // Wait for a round with nothing pending, then append to the renamed-in file.
        let fence = try makeDirectory(temporary, "Fence")
        try watcher.add(fence)
        try write("x", to: fence + "/file")
        #expect(await events.wait(for: fence))
        let seen = events.count(zone)

        try append("{\"seq\":3}\n", to: journal)
        #expect(await events.wait(for: zone, count: seen + 1))
    }

    /// Changes to an ignored name (a lock file) are not reported. A change in a second
    /// directory, made afterwards, is a fence: once it is reported, every earlier event
    /// was handled (one inotify queue, or one poll round, for both).
    @Test(arguments: methods)
    func ignoredNamesAreNotReported(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let fence = try makeDirectory(temporary, "Fence")
        try write("", to: zone + "/lock")
        let (watcher, events) = watcher(method, ignoring: ["lock"])
        try watcher.add(zone)
        try watcher.add(fence)

        try write("locked by 42", to: zone + "/lock")
        try write("x", to: fence + "/file")
        #expect(await events.wait(for: fence))
        #expect(events.count(zone) == 0)

        try append("{}\n", to: zone + "/lock")
        try write("{}\n", to: zone + "/journal-1.ndjson")
        #expect(await events.wait(for: zone))
    }

    #if os(Linux)
    /// A file with no name in the directory (`O_TMPFILE`, as a reader's spill of a large
    /// snapshot's fields) is not a change to the directory's files: writing and closing it
    /// is not reported (the fence as above).
    @Test(arguments: methods)
    func unnamedFilesAreNotReported(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let fence = try makeDirectory(temporary, "Fence")
        let (watcher, events) = watcher(method)
        try watcher.add(zone)
        try watcher.add(fence)

        let unnamed = open(zone, 0o20_000_000 | O_DIRECTORY | O_RDWR, 0o600)
        try #require(unnamed >= 0)
        let bytes = [UInt8](repeating: 0x7B, count: 8192)
        #expect(bytes.withUnsafeBytes { Glibc.write(unnamed, $0.baseAddress, $0.count) } == 8192)
        close(unnamed)
        try write("x", to: fence + "/file")
        #expect(await events.wait(for: fence))
        #expect(events.count(zone) == 0)

        try write("{}\n", to: zone + "/journal-1.ndjson")
        #expect(await events.wait(for: zone))
    }
    #endif

    /// A write that changes neither a file's size nor, within one tick of the clock that
    /// stamps file times, its times (a write in place) is still reported
    /// when the directory is polled: a look right after a write cannot tell a second write
    /// in the same tick by its stamps.
    @Test(arguments: methods)
    func reportsASameSizeWriteRightAfterALook(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let file = zone + "/journal-1.ndjson"
        try write("{\"seq\":1}\n" + String(repeating: " ", count: 64), to: file)
        let (watcher, events) = watcher(method)
        try overwrite(file, at: 10, with: "{\"seq\":2}\n")
        try watcher.add(zone)  // looks at the directory now, when polled
        try overwrite(file, at: 20, with: "{\"seq\":3}\n")
        #expect(await events.wait(for: zone))
    }

    private func overwrite(_ path: String, at offset: UInt64, with text: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data(text.utf8))
    }

    @Test(arguments: methods)
    func removedDirectoryIsNoLongerReported(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let first = try makeDirectory(temporary, "First")
        let second = try makeDirectory(temporary, "Second")
        let (watcher, events) = watcher(method)
        try watcher.add(first)
        try watcher.add(second)
        try watcher.add(second)  // adding twice changes nothing
        #expect(watcher.directories == [first, second])

        watcher.remove(first)
        #expect(watcher.directories == [second])
        #expect(watcher.method(for: first) == nil)
        try write("1", to: first + "/file")
        try write("2", to: second + "/file")
        #expect(await events.wait(for: second))
        #expect(events.count(first) == 0)

        // Watching it again works.
        try watcher.add(first)
        try write("3", to: first + "/other")
        #expect(await events.wait(for: first))
    }

    /// After `cancel()` nothing is reported. A second watcher on the same directory shows
    /// when the changes were visible.
    @Test(arguments: methods)
    func reportsNothingAfterCancel(method: DirectoryWatcher.Method) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        let (cancelled, cancelledEvents) = watcher(method)
        let (control, controlEvents) = watcher(method)
        try cancelled.add(zone)
        try control.add(zone)

        cancelled.cancel()
        cancelled.cancel()  // twice is fine
        #expect(cancelled.isCancelled)
        #expect(cancelled.directories.isEmpty)
        let refused = #expect(throws: MirrorError.self) { try cancelled.add(zone) }
        #expect(refused?.kind == .cancelled)

        try write("1", to: zone + "/journal-1.ndjson")
        #expect(await controlEvents.wait(for: zone))
        let seen = controlEvents.count(zone)
        try append("2", to: zone + "/journal-1.ndjson")
        #expect(await controlEvents.wait(for: zone, count: seen + 1))
        #expect(cancelledEvents.count(zone) == 0)
    }

    #if os(Linux)
    /// Every watcher of a process watches through one inotify instance: more watchers than
    /// the kernel allows a user instances (128 by default, for all of the user's processes)
    /// all watch natively, and each hears of its own directory.
    @Test func moreWatchersThanTheUsersInotifyInstancesAllWatchNatively() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let limit = try #require(Int(
            (try String(contentsOfFile: "/proc/sys/fs/inotify/max_user_instances", encoding: .utf8))
                .trimmingCharacters(in: .whitespacesAndNewlines)))
        // Past the limit where it is the default or near it; a machine set far higher
        // still checks a thousand watchers.
        let count = min(limit, 1_024) + 16
        var watchers: [(DirectoryWatcher, EventRecorder<String>, String)] = []
        for index in 0..<count {
            let zone = try makeDirectory(temporary, "z\(index)")
            let (watcher, events) = watcher(.native)
            try watcher.add(zone)
            #expect(watcher.method(for: zone) == .native, "watcher \(index)")
            watchers.append((watcher, events, zone))
        }
        for (_, _, zone) in watchers { try write("1", to: zone + "/journal-1.ndjson") }
        for (_, events, zone) in watchers {
            #expect(await events.wait(for: zone), "\(zone)")
            #expect(Set(events.events) == [zone])
        }
    }

    /// Two watchers of one directory share its inotify watch: one giving it up (removing
    /// the directory, or cancelled) leaves the other hearing of it, and the kernel's watch
    /// goes with the last of them.
    @Test func watchersOfOneDirectoryShareItsWatchUntilTheLastGoes() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Shared")
        let (first, firstEvents) = watcher(.native)
        let (second, secondEvents) = watcher(.native)
        let (third, thirdEvents) = watcher(.native)
        for watcher in [first, second, third] { try watcher.add(zone) }
        #expect(try Self.isWatchedByInotify(zone))

        first.remove(zone)
        third.cancel()
        try write("1", to: zone + "/journal-1.ndjson")
        #expect(await secondEvents.wait(for: zone))
        #expect(try Self.isWatchedByInotify(zone))

        second.remove(zone)
        #expect(try !Self.isWatchedByInotify(zone), "the last user gave the watch up")
        #expect(firstEvents.count(zone) == 0 && thirdEvents.count(zone) == 0)
        // Watched again from scratch.
        try first.add(zone)
        #expect(try Self.isWatchedByInotify(zone))
        try append("2", to: zone + "/journal-1.ndjson")
        #expect(await firstEvents.wait(for: zone))
        #expect(thirdEvents.count(zone) == 0)
    }

    /// Whether an inotify instance of this process watches the directory at `path`: its
    /// inode is in a watch line of the instance's `/proc/self/fdinfo` entry.
    static func isWatchedByInotify(_ path: String) throws -> Bool {
        var info = stat()
        try #require(stat(path, &info) == 0)
        let inode = "ino:" + String(info.st_ino, radix: 16)
        for descriptor in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor),
                  target == "anon_inode:inotify",
                  let lines = try? String(contentsOfFile: "/proc/self/fdinfo/" + descriptor, encoding: .utf8)
            else { continue }
            let watched = lines.split(separator: "\n").contains { line in
                line.hasPrefix("inotify wd:") && line.split(separator: " ").contains { $0 == inode }
            }
            if watched { return true }
        }
        return false
    }
    #endif

    @Test(arguments: methods)
    func missingDirectoryIsRefused(method: DirectoryWatcher.Method) throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let (watcher, _) = watcher(method)
        let missing = #expect(throws: MirrorError.self) { try watcher.add(temporary.path + "/missing") }
        #expect(missing?.kind == .notFound)
        try write("x", to: temporary.path + "/file")
        let file = #expect(throws: MirrorError.self) { try watcher.add(temporary.path + "/file") }
        #expect(file?.kind == .notFound)
        #expect(watcher.directories.isEmpty)
    }

    /// Past the native watch limit, directories are polled, and still reported.
    @Test func directoriesPastTheWatchLimitArePolled() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let first = try makeDirectory(temporary, "First")
        let second = try makeDirectory(temporary, "Second")
        let (watcher, events) = watcher(.native, nativeWatchLimit: 1)
        try watcher.add(first)
        try watcher.add(second)
        #expect(watcher.method(for: first) == .native)
        #expect(watcher.method(for: second) == .polling)

        try write("1", to: first + "/file")
        try write("2", to: second + "/file")
        #expect(await events.wait(for: first))
        #expect(await events.wait(for: second))
    }

    /// Waits until `directory` is polled. The watcher switches a directory to polling before
    /// it reports it, so after each report the test looks again; `false` when no report comes.
    private func waitUntilPolled(
        _ directory: String, by watcher: DirectoryWatcher, _ events: EventRecorder<String>
    ) async -> Bool {
        // The switch is state, not an event: look at it after each event and every 100 ms
        // (an event can come before the one that breaks the watch, or share its batch).
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let seen = events.count(directory)
            if watcher.method(for: directory) == .polling { return true }
            _ = await events.wait(for: directory, count: seen + 1, timeout: .milliseconds(100))
        }
        return watcher.method(for: directory) == .polling
    }

    /// A directory deleted under a native watch is reported, polled from then on, and its
    /// re-creation is reported too. The kernel reports the deletion itself (inotify's
    /// `IN_DELETE_SELF`) only once nothing holds the directory any more, which can be after
    /// later events elsewhere; a descriptor held across the removal makes that certain here,
    /// so the test waits for the switch to polling itself.
    @Test func deletedDirectoryIsPolledUntilItComesBack() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = try makeDirectory(temporary, "Todo")
        try write("1", to: zone + "/journal-1.ndjson")
        let (watcher, events) = watcher(.native)
        try watcher.add(zone)

        // Not inherited by the child processes other tests start meanwhile, which would hold
        // the directory (and its deletion event) until they end.
        let holder = open(zone, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(holder >= 0)
        try FileManager.default.removeItem(atPath: zone)
        #expect(await events.wait(for: zone))
        close(holder)
        #expect(await waitUntilPolled(zone, by: watcher, events))
        let seen = events.count(zone)

        _ = try makeDirectory(temporary, "Todo")
        try write("2", to: zone + "/journal-1.ndjson")
        #expect(await events.wait(for: zone, count: seen + 1))
    }

    #if canImport(Glibc)
    /// When the kernel's event queue overflows, every directory is reported, since any of
    /// them may have changed.
    /// Run in a process of its own (`mirror-worker watcher-overflow`): an overflow of the
    /// process's one inotify instance reaches every watcher in the process, and would make
    /// other tests' watchers hear of changes they did not make.
    @Test func queueOverflowReportsEveryDirectory() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let result = try await MirrorWorkerRun.run(["watcher-overflow", temporary.path])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "reported")
    }
    #endif

    /// Watchers close every descriptor they open, whether cancelled or deallocated; counted
    /// in a separate process, since other tests open files concurrently in this one.
    @Test func closesEveryFileDescriptor() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let result = try await MirrorWorkerRun.run(["watcher-fds", temporary.path])
        #expect(result.status == 0, "\(result.standardError)")
        let counts = result.standardOutput.split(separator: " ")
            .compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(counts.count == 3, "unexpected output: \(result.standardOutput)")
        let (before, watching, after) = (counts[0], counts[1], counts[2])
        #if canImport(Glibc)
        // Watchers open no descriptor of their own: the process's one inotify instance was
        // opened by the warm-up round, and polling opens none.
        #expect(watching == before)
        #else
        #expect(watching > before)
        #endif
        #expect(after == before)
    }
}
