import Foundation

/// Appends JSON text to a growable byte buffer without going through Foundation: literal
/// fragments, integers, escaped strings and raw JSON bytes.
///
/// The JSON-file database builds every journal line and snapshot record with it, so that
/// encoding a change costs a few copies and no per-field allocation.
package struct JSONByteWriter {
    /// The bytes written so far.
    package var bytes: [UInt8] = []

    /// The last string given to ``append(repeatedString:)``, and its quoted bytes.
    private var repeated: (string: String, quoted: [UInt8])?

    /// Creates an empty writer with room for `capacity` bytes.
    package init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// The number of bytes written.
    package var count: Int { bytes.count }

    /// Removes everything written, keeping the capacity.
    package mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Appends a literal fragment, which must already be valid JSON text.
    package mutating func append(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends one byte.
    package mutating func append(byte: UInt8) { bytes.append(byte) }

    /// Appends raw bytes, which must already be valid JSON text.
    package mutating func append(raw data: Data) {
        data.withUnsafeBytes { raw in
            bytes.append(contentsOf: raw.bindMemory(to: UInt8.self))
        }
    }

    /// Appends an integer in decimal.
    package mutating func append(_ value: Int) {
        if value < 0 {
            bytes.append(UInt8(ascii: "-"))
            append(unsigned: value.magnitude)
        } else {
            append(unsigned: UInt(value))
        }
    }

    /// Appends an unsigned integer in decimal.
    package mutating func append(unsigned value: UInt) {
        if value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        var remaining = value
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while remaining > 0 {
                count += 1
                buffer[24 - count] = UInt8(ascii: "0") + UInt8(remaining % 10)
                remaining /= 10
            }
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// Appends a clock reading as the JSON string `"<millis>-<counter>"`.
    package mutating func append(_ clock: HLCTimestamp) {
        bytes.append(UInt8(ascii: "\""))
        append(Int(clock.millis))
        bytes.append(UInt8(ascii: "-"))
        append(unsigned: UInt(clock.counter))
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `string` as a quoted, escaped JSON string.
    package mutating func append(string: String) {
        Self.appendQuoted(string, to: &bytes, asJSONEncoder: false)
    }

    /// Appends `string` as ``append(string:)`` does; when it is the string this method was
    /// last given, by copying the bytes it was quoted as then (a journal append repeats its
    /// writer's id on every line).
    package mutating func append(repeatedString string: String) {
        if let repeated, repeated.string == string {
            bytes.append(contentsOf: repeated.quoted)
            return
        }
        var quoted: [UInt8] = []
        Self.appendQuoted(string, to: &quoted, asJSONEncoder: false)
        bytes.append(contentsOf: quoted)
        repeated = (string, quoted)
    }

    /// Appends `string` quoted and escaped: `"` and `\` with a backslash, `\n \r \t`,
    /// other control characters as `\u00xx`; and, `asJSONEncoder`, the way `JSONEncoder`
    /// escapes (what ``DirectJSONEncoder`` must give): `/` as `\/`, `\b` and `\f` too.
    package static func appendQuoted(_ string: String, to bytes: inout [UInt8], asJSONEncoder: Bool) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                // Eight plain bytes at a time, up to the first that may need escaping (the
                // byte-wise look below passes multi-byte UTF-8 on unchanged).
                if utf8.count - index >= 8 {
                    let word = UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self)
                    if !JSONScanner.needsALook(word), !asJSONEncoder || !JSONScanner.hasByte(word, UInt8(ascii: "/")) {
                        index += 8
                        continue
                    }
                }
                let byte = utf8[index]
                index += 1
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                        || (asJSONEncoder && byte == UInt8(ascii: "/"))
                else { continue }
                if runStart < index - 1 {
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<(index - 1)]))
                }
                runStart = index
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(byte)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08 where asJSONEncoder: bytes.append(UInt8(ascii: "b"))
                case 0x0C where asJSONEncoder: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                              hexDigit(byte >> 4), hexDigit(byte & 0xF)])
                }
            }
            if runStart < utf8.count {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
