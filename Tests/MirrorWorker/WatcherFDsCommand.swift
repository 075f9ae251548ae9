#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import MagicMirror

/// `mirror-worker watcher-fds <directory>`: starts directory watchers of every kind in
/// `<directory>`, makes them report a change, removes directories, cancels some and drops
/// the others, and prints the number of open file descriptors before, while watching, and
/// after: `<before> <watching> <after>`.
enum WatcherFDsCommand {
    static func run(_ arguments: [String]) async throws {
        guard let root = arguments.first else { throw WorkerUsageError("watcher-fds <directory>") }
        // A first round opens what Dispatch and Foundation keep open for the process's
        // lifetime (Dispatch's event loop descriptors are made on first use).
        for (watcher, _, _) in try startWatchers(in: root + "/warm-up") { watcher.cancel() }
        let before = try openDescriptorCount()
        var watchers = try startWatchers(in: root + "/counted")
        let watching = try openDescriptorCount()
        for (index, (watcher, _, directories)) in watchers.enumerated() {
            watcher.remove(directories[1])
            if index % 2 == 0 { watcher.cancel() }
        }
        watchers.removeAll()  // the others are cancelled by deinit
        let after = try openDescriptorCount()
        print("\(before) \(watching) \(after)")
    }

    /// Starts native, polling and mixed watchers on four directories each, and waits until
    /// each reported a change.
    private static func startWatchers(
        in root: String
    ) throws -> [(DirectoryWatcher, DispatchSemaphore, [String])] {
        var watchers: [(DirectoryWatcher, DispatchSemaphore, [String])] = []
        let kinds: [(DirectoryWatcher.Method, Int)] = [(.native, .max), (.polling, .max), (.native, 2)]
        for (index, (method, limit)) in (kinds + kinds).enumerated() {
            let reported = DispatchSemaphore(value: 0)
            let watcher = DirectoryWatcher(
                method: method, pollInterval: .milliseconds(20), nativeWatchLimit: limit
            ) { _ in reported.signal() }
            var directories: [String] = []
            for zone in 0..<4 {
                let directory = "\(root)/w\(index)/z\(zone)"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try Data("{}\n".utf8).write(to: URL(fileURLWithPath: directory + "/journal-1.ndjson"))
                try watcher.add(directory)
                directories.append(directory)
            }
            watchers.append((watcher, reported, directories))
        }
        for (_, reported, directories) in watchers {
            try Data("{}\n".utf8).write(to: URL(fileURLWithPath: directories[0] + "/snapshot.json"))
            guard reported.wait(timeout: .now() + 60) == .success else {
                throw WorkerUsageError("a watcher did not report a change")
            }
        }
        return watchers
    }

    /// The number of descriptors the process has open.
    static func openDescriptorCount() throws -> Int {
        #if os(Linux)
        let path = "/proc/self/fd"
        #else
        let path = "/dev/fd"
        #endif
        return try FileManager.default.contentsOfDirectory(atPath: path).count
    }
}

struct WorkerUsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
