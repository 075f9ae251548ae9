/// JSON text as `JSONEncoder` writes it: scalars, and strings escaped its way.
enum DirectJSONText {
    static func appendLiteral(_ literal: StaticString, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// An integer or a Boolean: its `description`, as `JSONEncoder` writes it.
    static func appendDescription(_ value: some CustomStringConvertible, to bytes: inout [UInt8]) {
        var description = value.description
        description.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// A float as `JSONEncoder` writes it: its `description` without a trailing `.0`;
    /// `.nan` and infinities decline (`JSONEncoder` throws for them).
    static func appendFloat<Number: BinaryFloatingPoint & CustomStringConvertible>(
        _ value: Number, to bytes: inout [UInt8]
    ) throws {
        guard value.isFinite else { throw DirectJSONEncoder.Declined() }
        var description = value.description
        description.withUTF8 { utf8 in
            var count = utf8.count
            if count > 2, utf8[count - 2] == UInt8(ascii: "."), utf8[count - 1] == UInt8(ascii: "0") {
                count -= 2
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<count]))
        }
    }

    /// `string` quoted, escaped as `JSONEncoder` escapes it: `"`, `\` and `/` with a
    /// backslash, `\b \f \n \r \t`, other control characters as `\u00xx`.
    static func appendEscaped(_ string: String, to bytes: inout [UInt8]) {
        JSONByteWriter.appendQuoted(string, to: &bytes, asJSONEncoder: true)
    }
}
