import Foundation
import MagicMirror

/// The parent of the `cascade-delete` workload.
struct BenchParent: Recordable {
    var id: String
}

/// A child that goes with its parent.
struct BenchChild: Recordable {
    var id: String
    var title: String
    var parent: Reference<BenchParent>

    static let deleteRules: [DeleteRule<BenchChild>] = [.cascade("parent", \.parent)]
}

extension Workloads {
    /// `cascade-delete`: one durable commit deletes a parent whose `sizes.cascade` children
    /// (10,000 in the full run) go with it by a cascade rule — the planning, the intent, and
    /// both zones' appends — beside the baseline measured in the same run: one plain durable
    /// commit deleting as many records of a zone without rules.
    ///
    /// Target: at most 3× the plain delete (the cascade reads the children's zone to find
    /// them, writes and removes an intent, and appends to two zones).
    static func cascadeDelete(_ sizes: Sizes) async throws -> [BenchResult] {
        let directory = try BenchDirectory("cascade")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url, options: options(durable: true))
        _ = try await Mirror<BenchChild>(database: database)  // stores the cascade rule
        let count = sizes.cascade
        let encoder = JSONEncoder()
        let parentZone = ZoneID.public(BenchParent.recordType)
        let childZone = ZoneID.public(BenchChild.recordType)
        let plainZone = ZoneID.public("BenchPlain")
        let clock = HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000), counter: 0)
        try await database.commit(
            [.save("p", fields: try encoder.encode(BenchParent(id: "p")), baseVersion: 0, timestamp: clock)],
            to: parentZone)
        let children = try (0..<count).map { index in
            RecordOperation.save(
                "c\(index)",
                fields: try encoder.encode(BenchChild(id: "c\(index)", title: "child \(index)", parent: Reference(recordID: "p"))),
                baseVersion: 0, timestamp: clock)
        }
        try await database.commit(children, to: childZone)
        try await database.commit(children, to: plainZone)

        let later = HLCTimestamp(millis: clock.millis + 1, counter: 0)
        let plain = try await time {
            _ = try await database.commit(
                (0..<count).map { .delete("c\($0)", baseVersion: 1, timestamp: later) }, to: plainZone)
        }
        let cascade = try await time {
            _ = try await database.commit([.delete("p", baseVersion: 1, timestamp: later)], to: parentZone)
        }
        let left = try await database.fetchAll(in: childZone).records.count
        guard left == 0 else { throw BenchError("\(left) children survived their parent") }
        let ratio = cascade / plain
        return [BenchResult(
            name: "cascade-delete", variant: "\(count) children, one parent delete (durable)", n: count,
            seconds: cascade, perOpMicros: cascade / Double(count) * 1e6,
            baseline: "one plain commit deleting \(count) records", baselineFigure: plain * 1000,
            baselineUnit: "ms", ratio: ratio, target: "≤ 3× the plain delete", meetsTarget: ratio <= 3,
            note: String(format: "cascade %.1f ms, plain delete %.1f ms", cascade * 1000, plain * 1000))]
    }
}
