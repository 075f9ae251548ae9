import Foundation

/// A strict JSON scanner over UTF-8 bytes: validates values without building them, and
/// reads the few scalar values the JSON-file database needs (strings, integers, booleans).
///
/// It is what keeps opening a large database fast: a journal line or snapshot record is
/// read with one pass over its bytes, extracting the envelope values and the raw bytes of
/// the `fields` object, instead of building a Foundation object graph per line.
///
/// Strictness follows RFC 8259: no trailing commas, no comments, no single quotes, no
/// leading zeros or `+` signs, strings free of raw control characters, escapes limited to
/// the standard ones with `\u` surrogates in pairs, and well-formed UTF-8 (no overlong
/// forms, no encoded surrogates, nothing above U+10FFFF).
///
/// > Important: The scanner reads through an unsafe pointer; create it only inside a
/// > `withUnsafeBytes` (or similar) closure and do not let it escape.
package struct JSONScanner {
    /// The first byte.
    let base: UnsafePointer<UInt8>
    /// One past the last readable byte.
    package let end: Int
    /// The index of the next byte to read.
    package var position: Int

    /// The deepest nesting of objects and arrays accepted.
    package static let maximumDepth = 10_000

    /// Creates a scanner over `count` bytes at `base`, starting at `position`.
    package init(base: UnsafePointer<UInt8>, count: Int, position: Int = 0) {
        self.base = base
        self.end = count
        self.position = position
    }

    // MARK: Whole values

    /// Whether `data` holds exactly one JSON object, with optional white space around it.
    package static func isSingleObject(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            var scanner = JSONScanner(base: base, count: raw.count)
            scanner.skipWhitespace()
            guard scanner.peek == UInt8(ascii: "{"), scanner.skipValue() else { return false }
            scanner.skipWhitespace()
            return scanner.isAtEnd
        }
    }

    /// Whether every byte was read.
    package var isAtEnd: Bool { position >= end }

    /// The next byte, or `nil` at the end.
    package var peek: UInt8? { position < end ? base[position] : nil }

    /// The byte at `index`, which must be in range.
    package subscript(index: Int) -> UInt8 { base[index] }

    /// A pointer to the byte at `index`.
    package func pointer(at index: Int) -> UnsafePointer<UInt8> { base + index }

    /// Skips spaces, tabs, line feeds and carriage returns.
    package mutating func skipWhitespace() {
        while position < end {
            switch base[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// Reads `byte` (after white space) and returns whether it was there.
    package mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard position < end, base[position] == byte else { return false }
        position += 1
        return true
    }

    /// Reads the object at the current position (after white space), member by member:
    /// `member` gets each key, the range of its token (quotes included) and the scanner at its
    /// value, which it must read or skip. A key that appears twice is given twice.
    ///
    /// - Returns: `false` when the bytes are not a valid object or `member` returns `false`.
    package mutating func scanObject(_ member: (String, Range<Int>, inout JSONScanner) -> Bool) -> Bool {
        guard consume(UInt8(ascii: "{")) else { return false }
        if consume(UInt8(ascii: "}")) { return true }
        while true {
            skipWhitespace()
            let keyStart = position
            guard let key = readString() else { return false }
            let keyToken = keyStart..<position
            guard consume(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            guard member(key, keyToken, &self) else { return false }
            if consume(UInt8(ascii: ",")) { continue }
            return consume(UInt8(ascii: "}"))
        }
    }

    /// Skips one complete, valid JSON value (after white space).
    ///
    /// - Parameter maximumDepth: The deepest nesting of objects and arrays accepted.
    /// - Returns: `false` when the bytes are not a valid value (or nest deeper than
    ///   `maximumDepth`); the position is then unspecified.
    package mutating func skipValue(maximumDepth: Int = Self.maximumDepth) -> Bool {
        // Each nesting level is one bit: 1 for an object, 0 for an array. The first 64
        // levels live in `inline`; deeper ones spill into `overflow`.
        var depth = 0
        var inline: UInt64 = 0
        var overflow: [UInt64] = []

        func isObject(_ level: Int) -> Bool {
            if level < 64 { return inline & (1 << UInt64(level)) != 0 }
            return overflow[(level - 64) >> 6] & (1 << UInt64((level - 64) & 63)) != 0
        }

        while true {
            // Expect a value.
            skipWhitespace()
            guard position < end else { return false }
            var opened = false
            switch base[position] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let object = base[position] == UInt8(ascii: "{")
                position += 1
                skipWhitespace()
                guard position < end else { return false }
                let closer = object ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if base[position] == closer {
                    position += 1
                } else {
                    guard depth < maximumDepth else { return false }
                    if depth < 64 {
                        if object { inline |= 1 << UInt64(depth) } else { inline &= ~(1 << UInt64(depth)) }
                    } else {
                        let index = (depth - 64) >> 6
                        let bit = UInt64(1) << UInt64((depth - 64) & 63)
                        if index == overflow.count { overflow.append(0) }
                        if object { overflow[index] |= bit } else { overflow[index] &= ~bit }
                    }
                    depth += 1
                    if object {
                        guard skipString(), consume(UInt8(ascii: ":")) else { return false }
                    }
                    opened = true
                }
            case UInt8(ascii: "\""):
                guard skipString() else { return false }
            case UInt8(ascii: "t"):
                guard skipLiteral("true") else { return false }
            case UInt8(ascii: "f"):
                guard skipLiteral("false") else { return false }
            case UInt8(ascii: "n"):
                guard skipLiteral("null") else { return false }
            default:
                guard skipNumber() else { return false }
            }
            if opened { continue }
            // After a value: close containers or move to the next member.
            while true {
                if depth == 0 { return true }
                skipWhitespace()
                guard position < end else { return false }
                let byte = base[position]
                position += 1
                let object = isObject(depth - 1)
                if byte == UInt8(ascii: ",") {
                    if object {
                        skipWhitespace()
                        guard skipString(), consume(UInt8(ascii: ":")) else { return false }
                    }
                    break
                } else if byte == (object ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    depth -= 1
                } else {
                    return false
                }
            }
        }
    }

    private mutating func skipLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard end - position >= count else { return false }
        guard memcmp(base + position, literal.utf8Start, count) == 0 else { return false }
        position += count
        return true
    }

    /// Skips a number in strict JSON syntax.
    private mutating func skipNumber() -> Bool {
        if position < end, base[position] == UInt8(ascii: "-") { position += 1 }
        guard position < end else { return false }
        if base[position] == UInt8(ascii: "0") {
            position += 1
        } else if isDigit(base[position]) {
            while position < end, isDigit(base[position]) { position += 1 }
        } else {
            return false
        }
        if position < end, base[position] == UInt8(ascii: ".") {
            position += 1
            guard position < end, isDigit(base[position]) else { return false }
            while position < end, isDigit(base[position]) { position += 1 }
        }
        if position < end, base[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < end, base[position] == UInt8(ascii: "+") || base[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard position < end, isDigit(base[position]) else { return false }
            while position < end, isDigit(base[position]) { position += 1 }
        }
        return true
    }

    @inline(__always) private func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    // MARK: Scalars

    /// Reads an integer (no fraction, no exponent) after white space.
    package mutating func readInt() -> Int? {
        skipWhitespace()
        var negative = false
        if position < end, base[position] == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard position < end, isDigit(base[position]) else { return nil }
        if base[position] == UInt8(ascii: "0"), position + 1 < end, isDigit(base[position + 1]) {
            return nil
        }
        var value = 0
        while position < end, isDigit(base[position]) {
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(Int(base[position] - UInt8(ascii: "0")))
            guard !overflowA, !overflowB else { return nil }
            value = sum
            position += 1
        }
        if position < end, base[position] == UInt8(ascii: ".") || base[position] | 0x20 == UInt8(ascii: "e") {
            return nil
        }
        return negative ? -value : value
    }

    /// Reads `true` or `false` after white space.
    package mutating func readBool() -> Bool? {
        skipWhitespace()
        if skipLiteral("true") { return true }
        if skipLiteral("false") { return false }
        return nil
    }
}
