/// XXH64, the 64-bit xxHash (seed 0), computed over bytes given in one or more pieces.
///
/// The journal's checksum of an append (see the format article, "Checksums"): fast enough
/// to run over every byte a writer appends and a reader reads (several GB/s), and the same
/// digest `xxhsum -H1` prints, so that a person can check an append with standard tools.
/// It detects damage and holes, not tampering: it is no cryptographic hash.
///
/// Written from the algorithm's public specification: four lanes take 32-byte stripes;
/// the rest is mixed in 8, 4 and 1 byte at a time; a final avalanche spreads every bit.
struct XXHash64 {
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var lanes: (UInt64, UInt64, UInt64, UInt64) = (
        prime1 &+ prime2, prime2, 0, 0 &- prime1)
    /// Bytes of an unfinished stripe, waiting for the next piece.
    private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var pendingCount = 0
    private var total: UInt64 = 0

    init() {}

    /// The digest of `count` bytes at `base`.
    static func digest(_ base: UnsafeRawPointer, count: Int) -> UInt64 {
        var hash = XXHash64()
        hash.update(base, count: count)
        return hash.finalize()
    }

    /// Adds the next `count` bytes at `base`.
    mutating func update(_ base: UnsafeRawPointer, count: Int) {
        total &+= UInt64(count)
        var position = 0
        if pendingCount > 0 {
            let taken = min(32 - pendingCount, count)
            withUnsafeMutableBytes(of: &pending) { buffer in
                buffer.baseAddress!.advanced(by: pendingCount).copyMemory(from: base, byteCount: taken)
            }
            pendingCount += taken
            position = taken
            guard pendingCount == 32 else { return }
            withUnsafeBytes(of: pending) { stripes($0.baseAddress!, count: 32) }
            pendingCount = 0
        }
        let whole = (count - position) & ~31
        if whole > 0 {
            stripes(base + position, count: whole)
            position += whole
        }
        if position < count {
            withUnsafeMutableBytes(of: &pending) { buffer in
                buffer.baseAddress!.copyMemory(from: base + position, byteCount: count - position)
            }
            pendingCount = count - position
        }
    }

    /// The digest of every byte added.
    func finalize() -> UInt64 {
        var hash: UInt64
        if total >= 32 {
            hash = Self.rotate(lanes.0, 1) &+ Self.rotate(lanes.1, 7)
                &+ Self.rotate(lanes.2, 12) &+ Self.rotate(lanes.3, 18)
            hash = Self.merge(hash, lanes.0)
            hash = Self.merge(hash, lanes.1)
            hash = Self.merge(hash, lanes.2)
            hash = Self.merge(hash, lanes.3)
        } else {
            hash = Self.prime5
        }
        hash &+= total
        withUnsafeBytes(of: pending) { buffer in
            var position = 0
            while position + 8 <= pendingCount {
                let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                hash = Self.rotate(hash ^ Self.round(0, word), 27) &* Self.prime1 &+ Self.prime4
                position += 8
            }
            if position + 4 <= pendingCount {
                let word = UInt64(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt32.self)))
                hash = Self.rotate(hash ^ (word &* Self.prime1), 23) &* Self.prime2 &+ Self.prime3
                position += 4
            }
            while position < pendingCount {
                hash = Self.rotate(hash ^ (UInt64(buffer[position]) &* Self.prime5), 11) &* Self.prime1
                position += 1
            }
        }
        hash ^= hash >> 33
        hash &*= Self.prime2
        hash ^= hash >> 29
        hash &*= Self.prime3
        hash ^= hash >> 32
        return hash
    }

    /// Mixes whole 32-byte stripes (`count` is a multiple of 32) into the lanes.
    private mutating func stripes(_ base: UnsafeRawPointer, count: Int) {
        var (a, b, c, d) = lanes
        var position = 0
        while position < count {
            a = Self.round(a, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self)))
            b = Self.round(b, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position + 8, as: UInt64.self)))
            c = Self.round(c, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position + 16, as: UInt64.self)))
            d = Self.round(d, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position + 24, as: UInt64.self)))
            position += 32
        }
        lanes = (a, b, c, d)
    }

    @inline(__always)
    private static func round(_ accumulator: UInt64, _ lane: UInt64) -> UInt64 {
        rotate(accumulator &+ lane &* prime2, 31) &* prime1
    }

    private static func merge(_ hash: UInt64, _ lane: UInt64) -> UInt64 {
        (hash ^ round(0, lane)) &* prime1 &+ prime4
    }

    @inline(__always)
    private static func rotate(_ value: UInt64, _ bits: UInt64) -> UInt64 {
        (value << bits) | (value >> (64 - bits))
    }
}
