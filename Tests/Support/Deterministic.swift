/// FNV-1a, 64 bits: a small, stable digest, the same in every process (the tests compare
/// digests that `mirror-worker` processes print).
public enum FNV1a {
    public static func hash(_ text: String) -> UInt64 { hash(Array(text.utf8)) }

    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            value ^= UInt64(byte)
            value &*= 0x100_0000_01b3
        }
        return value
    }
}

/// SplitMix64: a seeded generator, so that a failing run can be repeated from the seed it
/// printed.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var value = state
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }
}
