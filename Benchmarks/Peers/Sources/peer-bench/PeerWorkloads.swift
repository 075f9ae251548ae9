import Foundation
import MirrorTestSupport

/// How big each workload is.
struct PeerSizes {
    var inserts: Int
    var batch: Int
    var scaleSmall: Int
    var scaleLarge: Int
    var updates: Int
    var open: Int

    static let full = PeerSizes(inserts: 2_000, batch: 100_000, scaleSmall: 1_000, scaleLarge: 100_000, updates: 1_000, open: 100_000)
    static let quick = PeerSizes(inserts: 100, batch: 2_000, scaleSmall: 200, scaleLarge: 2_000, updates: 100, open: 2_000)
}

/// The workloads, each run on both engines in turn, in one process, on the same disk.
enum PeerWorkloads {
    static let names = ["insert-durable", "batch-insert", "update-at-scale", "open"]

    /// Runs a workload on MagicMirror, then on GRDB, and returns both results; the
    /// MagicMirror result carries GRDB's figure as its baseline and the ratio.
    static func run(_ name: String, sizes: PeerSizes) async throws -> [BenchResult] {
        switch name {
        case "insert-durable":
            let records = BenchRecord.makeMany(sizes.inserts)
            let raw = try rawAppendFsync(count: sizes.inserts)
            return try await compare(lowerIsBetter: true, note: "one record per durable transaction; "
                + String(format: "raw 200-byte append + fsync on this disk: %.1f µs", raw * 1e6)) {
                try await insertEach($0, records)
            }
        case "batch-insert":
            let records = BenchRecord.makeMany(sizes.batch)
            return try await compare(lowerIsBetter: false, note: "\(sizes.batch) records in one durable transaction") {
                try await insertBatch($0, records)
            }
        case "update-at-scale":
            var results: [BenchResult] = []
            for size in [sizes.scaleSmall, sizes.scaleLarge] {
                results += try await compare(lowerIsBetter: true, note: "one durable update at a time among \(size) records") {
                    try await updateEach($0, zoneSize: size, updates: sizes.updates)
                }
            }
            return results
        case "open":
            // The database and the mirror open the same way: through a mirror.
            let records = BenchRecord.makeMany(sizes.open)
            let mirror = try await open(MirrorStore.self, records)
            let grdb = try await open(GRDBStore.self, records)
            return pair([mirror], grdb, lowerIsBetter: true, note: "a new process reads \(sizes.open) records into an array")
        default:
            preconditionFailure("unknown workload \(name)")
        }
    }

    /// Runs one workload on the mirror, on MagicMirror's database alone and on GRDB, in turn.
    static func compare(
        lowerIsBetter: Bool, note: String, _ body: (any PeerStore.Type) async throws -> BenchResult
    ) async throws -> [BenchResult] {
        let mirror = try await body(MirrorStore.self)
        let database = try await body(JSONFileStore.self)
        let grdb = try await body(GRDBStore.self)
        return pair([mirror, database], grdb, lowerIsBetter: lowerIsBetter, note: note)
    }

    /// MagicMirror's results of a workload, each compared with GRDB's, then GRDB's.
    static func pair(_ mine: [BenchResult], _ grdb: BenchResult, lowerIsBetter: Bool, note: String) -> [BenchResult] {
        mine.map { compared($0, grdb, lowerIsBetter: lowerIsBetter, note: note) } + [{
            var peer = grdb
            peer.note = note
            return peer
        }()]
    }

    static func compared(
        _ mirror: BenchResult, _ grdb: BenchResult, lowerIsBetter: Bool, note: String
    ) -> BenchResult {
        var compared = mirror
        let figure: (BenchResult) -> Double = { $0.perOpMicros ?? $0.recordsPerSecond ?? $0.seconds }
        compared.baseline = "GRDB"
        compared.baselineFigure = figure(grdb)
        compared.baselineUnit = grdb.perOpMicros != nil ? "µs/op" : grdb.recordsPerSecond != nil ? "rec/s" : "s"
        compared.ratio = figure(mirror) / figure(grdb)
        compared.target = lowerIsBetter ? "ratio ≤ 1 (time)" : "ratio ≥ 1 (rate)"
        compared.meetsTarget = lowerIsBetter ? compared.ratio! <= 1 : compared.ratio! >= 1
        compared.note = note
        if let mine = mirror.peakResidentMiB, let theirs = grdb.peakResidentMiB {
            compared.note = note + String(format: "; peak memory %.2f× GRDB's", mine / theirs)
        }
        return compared
    }

    static func rawAppendFsync(count: Int) throws -> Double {
        let directory = try BenchDirectory("peer-raw")
        defer { directory.remove() }
        return Baselines.rawAppend(count: count, fsync: true, in: directory.url)
    }

    static func insertEach(_ Store: any PeerStore.Type, _ records: [BenchRecord]) async throws -> BenchResult {
        let directory = try BenchDirectory("peer-insert")
        defer { directory.remove() }
        var store = try await Store.init(directory: directory.url)
        let start = monotonicSeconds()
        for record in records { try await store.insert(record) }
        let seconds = monotonicSeconds() - start
        return BenchResult(
            name: "insert-durable", variant: Store.name, n: records.count, seconds: seconds,
            perOpMicros: seconds / Double(records.count) * 1e6)
    }

    static func insertBatch(_ Store: any PeerStore.Type, _ records: [BenchRecord]) async throws -> BenchResult {
        let directory = try BenchDirectory("peer-batch")
        defer { directory.remove() }
        var store = try await Store.init(directory: directory.url)
        let start = monotonicSeconds()
        try await store.insert(batch: records)
        let seconds = monotonicSeconds() - start
        return BenchResult(
            name: "batch-insert", variant: Store.name, n: records.count, seconds: seconds,
            recordsPerSecond: Double(records.count) / seconds)
    }

    static func updateEach(
        _ Store: any PeerStore.Type, zoneSize: Int, updates: Int
    ) async throws -> BenchResult {
        let directory = try BenchDirectory("peer-update")
        defer { directory.remove() }
        var store = try await Store.init(directory: directory.url)
        var records = BenchRecord.makeMany(zoneSize)
        try await store.insert(batch: records)
        // The same records, in the same order, for both engines.
        var generator = SplitMix64(seed: 42)
        let start = monotonicSeconds()
        for _ in 0..<updates {
            let index = Int(generator.next() % UInt64(zoneSize))
            records[index].number += 1
            try await store.update(records[index])
        }
        let seconds = monotonicSeconds() - start
        return BenchResult(
            name: "update-at-scale", variant: "\(Store.name), \(zoneSize) records", n: updates, seconds: seconds,
            perOpMicros: seconds / Double(updates) * 1e6)
    }

    static func open(_ Store: any PeerStore.Type, _ records: [BenchRecord]) async throws -> BenchResult {
        let directory = try BenchDirectory("peer-open")
        defer { directory.remove() }
        do {
            var store = try await Store.init(directory: directory.url)
            try await store.insert(batch: records)
            try await store.settle()
        }
        let report = try ChildProcess.launch(["--child-open", Store.name, directory.url.path, "\(records.count)"]).readAll()
        let fields = report.split(separator: " ").compactMap { Double($0) }
        guard fields.count == 2 else { throw PeerError("child open printed \(report)") }
        return BenchResult(name: "open", variant: Store.name, n: records.count, seconds: fields[0], peakResidentMiB: fields[1])
    }

    /// The `--child-open` process: opens a store, reads every record, prints the time it
    /// took and the process's peak resident memory.
    static func childOpen(_ arguments: [String]) async throws {
        guard arguments.count == 3, let expected = Int(arguments[2]) else { throw PeerError("bad arguments \(arguments)") }
        let directory = URL(fileURLWithPath: arguments[1])
        var count = 0
        let start = monotonicSeconds()
        switch arguments[0] {
        case MirrorStore.name: count = try await MirrorStore.openAll(directory: directory).count
        case GRDBStore.name: count = try await GRDBStore.openAll(directory: directory).count
        default: throw PeerError("unknown store \(arguments[0])")
        }
        let seconds = monotonicSeconds() - start
        guard count == expected else { throw PeerError("opened \(count) of \(expected) records") }
        print("\(seconds) \(peakResidentMiB() ?? .nan)")
    }
}
