import Foundation

/// Strings: skipped, located or read, strictly (escapes, surrogate pairs, well-formed UTF-8).
extension JSONScanner {
    /// Skips a string starting at the current `"`, validating it.
    package mutating func skipString() -> Bool {
        scanString() != nil
    }

    /// Validates the string starting at the current `"` and moves past it.
    ///
    /// - Returns: The range of its content (between the quotes) and whether it contains
    ///   escapes, or `nil` when it is not a valid string.
    package mutating func scanString() -> (start: Int, end: Int, escaped: Bool)? {
        guard position < end, base[position] == UInt8(ascii: "\"") else { return nil }
        position += 1
        let start = position
        var escaped = false
        while position < end {
            // Eight plain bytes at a time, up to the first that needs a look.
            while end - position >= 8,
                  !Self.needsALook(UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)) {
                position += 8
            }
            guard position < end else { break }
            let byte = base[position]
            if byte == UInt8(ascii: "\"") {
                let range = (start, position, escaped)
                position += 1
                return range
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
                guard skipEscape() else { return nil }
            } else if byte < 0x20 {
                return nil
            } else if byte < 0x80 {
                position += 1
            } else {
                guard skipUTF8Sequence() else { return nil }
            }
        }
        return nil
    }

    /// Whether one of the eight bytes of `word` is not plain string content: a quote, a
    /// backslash, a control byte (below 0x20) or part of a multi-byte UTF-8 sequence (0x80
    /// and above). Exact: never `false` when one is (`true` lets the byte-wise loop look).
    static func needsALook(_ word: UInt64) -> Bool {
        word & 0x8080_8080_8080_8080 != 0 || hasByteBelow(word, 0x20)
            || hasByte(word, 0x22) || hasByte(word, 0x5C)
    }

    /// Whether one of the eight bytes of `word` is below `n` (`n` ≤ 0x80). Exact.
    static func hasByteBelow(_ word: UInt64, _ n: UInt8) -> Bool {
        // A byte below n borrows into its high bit when n is subtracted from it, and had
        // that bit clear.
        let ones: UInt64 = 0x0101_0101_0101_0101
        return (word &- ones &* UInt64(n)) & ~word & 0x8080_8080_8080_8080 != 0
    }

    /// Whether one of the eight bytes of `word` is `byte`. Exact.
    static func hasByte(_ word: UInt64, _ byte: UInt8) -> Bool {
        // A byte equal to `byte` is below 1 once xored with it.
        hasByteBelow(word ^ (0x0101_0101_0101_0101 &* UInt64(byte)), 1)
    }

    /// Skips one escape sequence starting at the backslash.
    private mutating func skipEscape() -> Bool {
        position += 1
        guard position < end else { return false }
        switch base[position] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 1
            return true
        case UInt8(ascii: "u"):
            position += 1
            guard let unit = readHex4() else { return false }
            if unit >= 0xDC00 && unit <= 0xDFFF { return false }  // lone low surrogate
            if unit >= 0xD800 && unit <= 0xDBFF {
                guard end - position >= 2, base[position] == UInt8(ascii: "\\"),
                      base[position + 1] == UInt8(ascii: "u")
                else { return false }
                position += 2
                guard let low = readHex4(), low >= 0xDC00 && low <= 0xDFFF else { return false }
            }
            return true
        default:
            return false
        }
    }

    /// Reads four hex digits.
    private mutating func readHex4() -> UInt32? {
        guard end - position >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = base[position]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    /// Skips one well-formed multi-byte UTF-8 sequence.
    private mutating func skipUTF8Sequence() -> Bool {
        let lead = base[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return false
        }
        guard end - position >= length else { return false }
        let second = base[position + 1]
        guard second >= low && second <= high else { return false }
        for offset in 2..<max(length, 2) where base[position + offset] & 0xC0 != 0x80 {
            return false
        }
        position += length
        return true
    }

    /// Reads the string starting at the current `"` as a Swift string.
    package mutating func readString() -> String? {
        guard let (start, stop, escaped) = scanString() else { return nil }
        if !escaped {
            return String(decoding: UnsafeBufferPointer(start: base + start, count: stop - start), as: UTF8.self)
        }
        return Self.unescape(base: base, start: start, end: stop)
    }

    /// Decodes the content of a validated string that contains escapes.
    private static func unescape(base: UnsafePointer<UInt8>, start: Int, end: Int) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(end - start)
        var index = start
        func hex4(_ at: Int) -> UInt32 {
            var value: UInt32 = 0
            for offset in 0..<4 {
                let byte = base[at + offset]
                let digit: UInt32 = switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
                default: UInt32(byte - UInt8(ascii: "A") + 10)
                }
                value = value << 4 | digit
            }
            return value
        }
        while index < end {
            let byte = base[index]
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                index += 1
                continue
            }
            let kind = base[index + 1]
            index += 2
            switch kind {
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(index)
                index += 4
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    let low = hex4(index + 2)
                    index += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                bytes.append(contentsOf: String(Unicode.Scalar(scalar)!).utf8)
            default: bytes.append(kind)  // " \ /
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the bytes from `start` to `end` equal `literal`.
    package func bytesEqual(_ start: Int, _ end: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        return end - start == count && memcmp(base + start, literal.utf8Start, count) == 0
    }
}
