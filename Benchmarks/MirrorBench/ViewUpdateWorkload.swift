import Foundation
import MagicMirror

extension Workloads {
    /// `view-update`: the cost of one change to a mirror that has a live view of 50 (a
    /// filter, a sort by a field and a limit), at 1,000 and at 100,000 records.
    ///
    /// Each change edits one random record so that it enters the view, moves within it or
    /// leaves it (or changes outside it); the time measured is the mutation of `dataModel`
    /// with the view's update, which happens in it, until the view shows the change. The
    /// commits run in the background and are flushed between rounds, untimed (their cost
    /// is `mutate-one`'s). Best of three rounds. Target: the cost at 100,000 records is at
    /// most 1.5 times the cost at 1,000, which re-sorting or re-filtering could not meet.
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
            var generator = SplitMix(seed: 11)
            var best = Double.infinity
            var shown = 0
            for _ in 0..<3 {
                var seconds = 0.0
                for change in 0..<changes {
                    let index = Int(generator.next() % UInt64(mirrorSize))
                    // Into the first 50, anywhere, or out of the filter, in turn.
                    let number: Int
                    switch change % 3 {
                    case 0: number = -Int(generator.next() % 1_000)
                    case 1: number = Int(generator.next() % UInt64(mirrorSize))
                    default: number = Int(generator.next() % 100)
                    }
                    seconds += time {
                        mirror.dataModel[index].number = number
                        if change % 3 == 2 { mirror.dataModel[index].done.toggle() }
                        shown &+= view.count
                    }
                }
                best = min(best, seconds)
                try await mirror.flush()
            }
            guard shown > 0 else { throw BenchError("the view was empty") }
            perChange[mirrorSize] = best / Double(changes)
        }
        return scalePair(
            "view-update", (sizes.scaleSmall, sizes.scaleLarge), n: changes, perOp: perChange, limit: 1.5)
    }
}
