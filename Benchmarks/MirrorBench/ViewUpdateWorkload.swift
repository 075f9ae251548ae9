import Foundation
import MagicMirror
import MirrorTestSupport

extension Workloads {
    /// `view-update`: the cost of one change to a mirror that has a live view of 50 (a
    /// filter, a sort by a field and a limit), at 1,000 and at 100,000 records.
    ///
    /// Each change edits one random record so that it enters the view, moves within it or
    /// leaves it (or changes outside it); the time measured is the mutation of `dataModel`
    /// with the view's update, which happens in it, until the view shows the change. Each
    /// change is flushed, untimed, before the next (the commit's cost is `mutate-one`'s), so
    /// that no commit competes with the measurement. The figure is the median of 3 × `edits`
    /// changes. Target: the cost at 100,000 records is at most 1.5 times the cost at 1,000,
    /// which re-sorting or re-filtering could not meet.
    static func viewUpdate(_ sizes: Sizes) async throws -> [BenchResult] {
        var perChange: [Int: Double] = [:]
        let changes = sizes.edits
        for mirrorSize in [sizes.scaleSmall, sizes.scaleLarge] {
            let directory = try BenchDirectory("view-update")
            defer { directory.remove() }
            let database = try JSONFileDatabase(
                directory: directory.url.appendingPathComponent("db"), options: options(durable: false))
            _ = try await seed(database, count: mirrorSize)
            let mirror = try await Mirror<BenchRecord>(database: database)
            let view = mirror.view(where: \.done == false, sortedBy: \.number, limit: 50)
            guard mirror.dataModel.count == mirrorSize, view.count == 50 else {
                throw BenchError("mirror loaded \(mirror.dataModel.count) of \(mirrorSize) records")
            }
            var generator = SplitMix64(seed: 11)
            var samples: [Double] = []
            samples.reserveCapacity(changes * 3)
            var shown = 0
            for change in 0..<(changes * 3) {
                let index = Int(generator.next() % UInt64(mirrorSize))
                // Into the first 50, anywhere, or out of the filter, in turn.
                let number: Int
                switch change % 3 {
                case 0: number = -Int(generator.next() % 1_000)
                case 1: number = Int(generator.next() % UInt64(mirrorSize))
                default: number = Int(generator.next() % 100)
                }
                samples.append(time {
                    mirror.dataModel[index].number = number
                    if change % 3 == 2 { mirror.dataModel[index].done.toggle() }
                    shown &+= view.count
                })
                // Untimed, so that no commit runs while the next change is measured.
                try await mirror.flush()
            }
            guard shown > 0 else { throw BenchError("the view was empty") }
            perChange[mirrorSize] = samples.sorted()[samples.count / 2]
        }
        return scalePair(
            "view-update", (sizes.scaleSmall, sizes.scaleLarge), n: changes * 3, perOp: perChange, limit: 1.5)
    }
}
