#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport

/// A record that carries an asset.
struct BenchAssetRecord: Recordable {
    var id: String
    var file: Asset
}

extension Workloads {
    /// `asset`: stores a file of `sizes.asset` bytes (1 GiB in the full run) as an asset
    /// through a mirror (durable: copied, hashed, flushed), commits a record that carries it,
    /// then reads it back piece by piece with its digest checked.
    ///
    /// Figures: MiB/s of the store and of the read, and the growth of the process's peak
    /// resident memory over the run (on Linux the peak is reset first, so earlier workloads
    /// do not count). Target: the peak grows by at most 64 MiB, whatever the asset's size —
    /// the asset is never held in memory.
    static func asset(_ sizes: Sizes) async throws -> [BenchResult] {
        let directory = try BenchDirectory("asset")
        defer { directory.remove() }
        let source = directory.url.appendingPathComponent("source.bin")
        try writeSource(source, size: sizes.asset)
        let database = try JSONFileDatabase(directory: directory.url.appendingPathComponent("db"))
        let mirror = try await Mirror<BenchAssetRecord>(database: database)

        let before = resetPeakResident()
        var asset: Asset?
        let storing = try await time { asset = try await mirror.storeAsset(contentsOf: source) }
        guard let asset, asset.size == sizes.asset else { throw BenchError("the asset was not stored whole") }
        try FileManager.default.removeItem(at: source)
        mirror.dataModel.append(BenchAssetRecord(id: "a", file: asset))
        try await mirror.flush()
        var read = 0
        let reading = try await time {
            for try await piece in mirror.contents(of: mirror.dataModel[0].file) { read += piece.count }
        }
        guard read == sizes.asset else { throw BenchError("read \(read) of \(sizes.asset) bytes") }
        let peak = peakResidentMiB() ?? .nan
        let growth = peak - before
        let mebibytes = Double(sizes.asset) / Double(1 << 20)
        func result(_ variant: String, _ seconds: Double) -> BenchResult {
            BenchResult(
                name: "asset", variant: variant, n: 1, seconds: seconds,
                target: "peak memory grows ≤ 64 MiB", meetsTarget: growth <= 64, peakResidentMiB: peak,
                note: String(format: "%.0f MiB at %.0f MiB/s; peak resident +%.1f MiB", mebibytes, mebibytes / seconds, growth))
        }
        return [result("store \(Int(mebibytes)) MiB (durable)", storing), result("read \(Int(mebibytes)) MiB (checked)", reading)]
    }

    /// Writes `size` pseudo-random bytes, 1 MiB at a time.
    private static func writeSource(_ url: URL, size: Int) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw BenchError("cannot create \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var generator = SplitMix64(seed: 17)
        var written = 0
        while written < size {
            let count = min(1 << 20, size - written)
            var chunk = Data(count: count)
            chunk.withUnsafeMutableBytes { raw in
                let words = raw.bindMemory(to: UInt64.self)
                for index in words.indices { words[index] = generator.next() }
            }
            try handle.write(contentsOf: chunk)
            written += count
        }
    }

    /// Resets the peak resident size where the system allows it (Linux: `clear_refs`) and
    /// returns the current resident size in MiB (the peak, where it cannot be reset).
    private static func resetPeakResident() -> Double {
        #if canImport(Glibc)
        if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            try? handle.write(contentsOf: Data("5".utf8))
            try? handle.close()
        }
        #endif
        return peakResidentMiB() ?? .nan
    }
}
