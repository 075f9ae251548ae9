/// SHA-256 (FIPS 180-4), fed in pieces of any size: the digest that names an asset's file.
///
/// Written from the standard; the package has no dependencies, and Foundation on Linux
/// offers no hash. Feed bytes with ``update(_:)``, then read ``finish()`` once.
package struct SHA256: Sendable {
    private var h0: UInt32 = 0x6a09_e667
    private var h1: UInt32 = 0xbb67_ae85
    private var h2: UInt32 = 0x3c6e_f372
    private var h3: UInt32 = 0xa54f_f53a
    private var h4: UInt32 = 0x510e_527f
    private var h5: UInt32 = 0x9b05_688c
    private var h6: UInt32 = 0x1f83_d9ab
    private var h7: UInt32 = 0x5be0_cd19
    /// The bytes of an unfinished 64-byte block.
    private var block = [UInt8](repeating: 0, count: 64)
    private var blockCount = 0
    /// Bytes fed so far.
    private var length: UInt64 = 0

    /// A new hash of no bytes yet.
    package init() {}

    /// The digest of `bytes`, as 64 lowercase hexadecimal digits.
    package static func hex<Bytes: Collection<UInt8>>(of bytes: Bytes) -> String {
        var hash = SHA256()
        let array = Array(bytes)
        array.withUnsafeBytes { hash.update($0) }
        return hash.finish()
    }

    /// Feeds `bytes`.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var pointer = bytes.baseAddress, bytes.count > 0 else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if blockCount > 0 {
            let take = min(64 - blockCount, remaining)
            let start = blockCount
            block.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: start).copyMemory(from: pointer, byteCount: take) }
            blockCount += take
            pointer += take
            remaining -= take
            if blockCount < 64 { return }
            let full = block
            full.withUnsafeBytes { compress($0.baseAddress!, blocks: 1) }
            blockCount = 0
        }
        let blocks = remaining / 64
        if blocks > 0 {
            compress(pointer, blocks: blocks)
            pointer += blocks * 64
            remaining -= blocks * 64
        }
        if remaining > 0 {
            block.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: pointer, byteCount: remaining) }
            blockCount = remaining
        }
    }

    /// Pads the message, processes the last block and returns the digest as 64 lowercase
    /// hexadecimal digits. Call it once, after the last ``update(_:)``.
    package mutating func finish() -> String {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        let used = (blockCount + 1) % 64
        tail += [UInt8](repeating: 0, count: used <= 56 ? 56 - used : 120 - used)
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let savedLength = length
        tail.withUnsafeBytes { update($0) }
        length = savedLength
        var text = ""
        text.reserveCapacity(64)
        let digits = Array("0123456789abcdef".utf8)
        for word in [h0, h1, h2, h3, h4, h5, h6, h7] {
            for shift in stride(from: 28, through: 0, by: -4) {
                text.unicodeScalars.append(Unicode.Scalar(digits[Int((word >> UInt32(shift)) & 0xf)]))
            }
        }
        return text
    }

    /// Runs the compression function over `blocks` consecutive 64-byte blocks.
    private mutating func compress(_ pointer: UnsafeRawPointer, blocks: Int) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            Self.roundConstants.withUnsafeBufferPointer { k in
                for index in 0..<blocks {
                    let base = pointer + index * 64
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: base.loadUnaligned(fromByteOffset: t * 4, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let x = w[t - 15], y = w[t - 2]
                        let s0 = Self.rotate(x, 7) ^ Self.rotate(x, 18) ^ (x >> 3)
                        let s1 = Self.rotate(y, 17) ^ Self.rotate(y, 19) ^ (y >> 10)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    for t in 0..<64 {
                        let sum1 = Self.rotate(e, 6) ^ Self.rotate(e, 11) ^ Self.rotate(e, 25)
                        let choice = (e & f) ^ (~e & g)
                        let temporary1 = h &+ sum1 &+ choice &+ k[t] &+ w[t]
                        let sum0 = Self.rotate(a, 2) ^ Self.rotate(a, 13) ^ Self.rotate(a, 22)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let temporary2 = sum0 &+ majority
                        h = g
                        g = f
                        f = e
                        e = d &+ temporary1
                        d = c
                        c = b
                        b = a
                        a = temporary1 &+ temporary2
                    }
                    h0 &+= a
                    h1 &+= b
                    h2 &+= c
                    h3 &+= d
                    h4 &+= e
                    h5 &+= f
                    h6 &+= g
                    h7 &+= h
                }
            }
        }
    }

    @inline(__always) private static func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 {
        (value >> count) | (value << (32 - count))
    }

    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]
}
