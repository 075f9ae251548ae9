#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport

/// `mirror-worker open-close --db DIR [--count N] [--warm-up N] [--mirror] [--distinct]`:
/// opens a JSON-file database on one of 64 directories below `DIR` in turn (a new directory
/// each time with `--distinct`), subscribes to a zone, reads it (through a `Mirror` with
/// `--mirror`), cancels the subscription and drops the database, `N` times (default 20000),
/// after `--warm-up` cycles (default 2000) that let the allocator and Foundation settle. Prints
/// `<rss KiB before> <fds before> <rss KiB after N> <rss KiB after 2N> <fds after 2N>`
/// (it runs `N` cycles twice): a leak per database shows as resident memory growing in
/// both halves alike, or descriptors growing; what the process sets up once (threads,
/// allocator arenas) shows in the first half only.
enum OpenCloseCommand {
    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(
            arguments, flags: ["mirror", "distinct"],
            usage: "mirror-worker open-close --db DIR [--count N] [--warm-up N] [--mirror] [--distinct]")
        let directory = URL(fileURLWithPath: try options.required("db"))
        let count = try options.int("count", default: 20_000)
        let warmUp = try options.int("warm-up", default: 2_000)
        let how = Cycle(throughMirror: options.flag("mirror"), distinct: options.flag("distinct"))
        try await how.run(directory, times: warmUp, from: 0)
        let before = (try residentKiB(), try WatcherFDsCommand.openDescriptorCount())
        try await how.run(directory, times: count, from: warmUp)
        let middle = try residentKiB()
        try await how.run(directory, times: count, from: warmUp + count)
        let after = (try residentKiB(), try await settledDescriptorCount(atMost: before.1))
        print("\(before.0) \(before.1) \(middle) \(after.0) \(after.1)")
    }

    /// The open descriptors once the last databases dropped have closed theirs: a mirror's
    /// tasks end, and release their database, on other threads a moment after the mirror is
    /// dropped (on a loaded machine the count was seen 3 above `limit`). Waits up to 30 s for
    /// the count to come down to `limit`; a leak (one or more per database, thousands of
    /// cycles) never does.
    private static func settledDescriptorCount(atMost limit: Int) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        var count = try WatcherFDsCommand.openDescriptorCount()
        while count > limit, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            count = try WatcherFDsCommand.openDescriptorCount()
        }
        return count
    }

    private struct Cycle {
        var throughMirror: Bool
        var distinct: Bool

        func run(_ directory: URL, times: Int, from first: Int) async throws {
            for index in first..<(first + times) {
                let name = distinct ? "d\(index)" : "d\(index % 64)"
                let database = try JSONFileDatabase(directory: directory.appendingPathComponent(name))
                if throughMirror {
                    let mirror = try await Mirror<EditRecord>(database: database)
                    _ = mirror.dataModel.count
                } else {
                    let subscription = try database.subscribe(to: .public("Todo")) { _ in }
                    _ = try await database.fetchAll(in: .public("Todo"))
                    subscription.cancel()
                }
            }
        }
    }

    /// The process's resident set size, from `/proc/self/status` (`VmRSS`).
    private static func residentKiB() throws -> Int {
        #if os(Linux)
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            if let value = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) { return value }
        }
        throw WorkerUsageError("no VmRSS in /proc/self/status")
        #else
        var usage = rusage()
        getrusage(RUSAGE_SELF, &usage)
        return Int(usage.ru_maxrss) / 1024
        #endif
    }
}
