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
/// `<rss KiB before> <fds before> <rss KiB after N> <rss KiB after 2N> <fds after 2N>
/// <heap bytes before> <heap bytes after N> <heap bytes after 2N>` (it runs `N` cycles
/// twice), each taken once the dropped databases' descriptors are closed. The heap bytes
/// are those malloc has handed out and not had back (see ``LiveHeap``): a leak per database
/// grows them in both halves alike, while resident memory also moves with what the
/// allocator keeps for its threads (more threads and arenas on a loaded machine), so the
/// tests judge the heap and print the resident figures.
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
        // The heap first: its wait opens the dispatch timer (a timerfd) that later waits use.
        let before = (try residentKiB(), try await LiveHeap.settledBytes())
        let descriptors = try WatcherFDsCommand.openDescriptorCount()
        try await how.run(directory, times: count, from: warmUp)
        _ = try await settledDescriptorCount(atMost: descriptors)
        let middle = (try residentKiB(), try await LiveHeap.settledBytes())
        try await how.run(directory, times: count, from: warmUp + count)
        let descriptorsAfter = try await settledDescriptorCount(atMost: descriptors)
        let after = (try residentKiB(), try await LiveHeap.settledBytes())
        print("\(before.0) \(descriptors) \(middle.0) \(after.0) \(descriptorsAfter) \(before.1) \(middle.1) \(after.1)")
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

/// The bytes malloc has handed out and not had back, in every arena and in mmapped blocks
/// (glibc's `malloc_info`, which `mallinfo2` summarises but Swift's Glibc module does not
/// show): unlike resident memory, it does not move with the pages the allocator keeps.
enum LiveHeap {
    static func bytes() throws -> Int {
        #if canImport(Glibc)
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_info") else {
            throw WorkerUsageError("no malloc_info in this C library")
        }
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { throw WorkerUsageError("open_memstream failed") }
        let status = unsafeBitCast(symbol, to: MallocInfo.self)(0, stream)
        fclose(stream)
        defer { free(buffer) }
        guard status == 0, let buffer else { throw WorkerUsageError("malloc_info failed") }
        return try inUse(fromMallocInfo: String(cString: buffer))
        #else
        throw WorkerUsageError("the live heap is read from glibc's malloc_info")
        #endif
    }

    /// The live heap once the tasks that dropped databases leave behind have ended: sampled
    /// every 50 ms until two samples in a row are within 4 KB (on a loaded machine a mirror's
    /// tasks end, and free what they hold, a while after its descriptors are closed), for at
    /// most 10 s. The smallest sample is returned.
    static func settledBytes() async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        var previous = try bytes()
        var smallest = previous
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            let sample = try bytes()
            smallest = min(smallest, sample)
            if abs(sample - previous) < 4_096 { break }
            previous = sample
        }
        return smallest
    }

    /// From the totals after the last arena: the arenas' memory (`system current`) and the
    /// mmapped blocks, less the free chunks (`fast`, `rest`, which counts each arena's top).
    static func inUse(fromMallocInfo xml: String) throws -> Int {
        guard let lastHeap = xml.range(of: "</heap>", options: .backwards) else {
            throw WorkerUsageError("malloc_info: no heap in \(xml.prefix(200))")
        }
        let totals = xml[lastHeap.upperBound...]
        func size(_ element: String) throws -> Int {
            guard let start = totals.range(of: element),
                  let sizeKey = totals[start.upperBound...].range(of: "size=\""),
                  let end = totals[sizeKey.upperBound...].firstIndex(of: "\""),
                  let value = Int(totals[sizeKey.upperBound..<end])
            else { throw WorkerUsageError("malloc_info: no \(element) in \(totals)") }
            return value
        }
        return try size("<system type=\"current\"") + size("<total type=\"mmap\"")
            - size("<total type=\"fast\"") - size("<total type=\"rest\"")
    }
}
