import Foundation

/// The bytes of a test asset, derived from its name and size, so that a `mirror-worker`
/// process and a test make the same bytes without passing them around.
public enum AssetPayload {
    /// `size` bytes, the same for the same `name` in every process.
    public static func bytes(name: String, size: Int) -> Data {
        var generator = SplitMix64(seed: FNV1a.hash(name))
        var data = Data(count: size)
        data.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < size {
                var word = generator.next()
                let take = min(8, size - offset)
                withUnsafeBytes(of: &word) { raw.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
                offset += take
            }
        }
        return data
    }
}
