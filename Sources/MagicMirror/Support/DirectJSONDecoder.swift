import Foundation

/// Decodes a `Decodable` value straight from the UTF-8 bytes of a JSON object, giving what a
/// `JSONDecoder` with default strategies gives, or declining.
///
/// Opening a mirror decodes every stored record. `JSONDecoder` first builds a map of the
/// whole input, then a `[String: …]` dictionary for every object it decodes; for records of
/// a few fields that is most of its time, and the map is as large as the input. This
/// decoder reads the bytes in place: an object's members are located once (key bytes and
/// value range, in a small array), a key is found by comparing bytes, and a scalar is read
/// where it lies.
///
/// It never gives a value `JSONDecoder` would not give. Wherever it cannot be sure of that,
/// it *declines* (throws ``Declined``), and the caller decodes the record with `JSONDecoder`,
/// which gives the value or the error to report. It declines on:
///
/// - anything `JSONDecoder` would refuse (invalid JSON, a missing key, a type mismatch, a
///   number that does not fit), so errors always come from `JSONDecoder`;
/// - keys with escapes or non-ASCII bytes (`JSONDecoder` matches keys by `String` equality,
///   which is canonical equivalence; bytes tell only for ASCII);
/// - numbers written with a fraction or an exponent where an integer is asked for, `-0`
///   as an integer, `Decimal`, `superDecoder()`, nesting deeper than ``maximumDepth``;
/// - input that is not an object at the top.
///
/// Duplicate keys resolve as in `JSONDecoder`: the first occurrence wins. `Date`, `Data`,
/// `URL` and `UUID` follow `JSONDecoder`'s default strategies (seconds since 2001, Base64,
/// `URL(string:)`, `UUID(uuidString:)`).
///
/// Stands in only for a decoder whose strategies are the defaults (``canStandIn(for:)``),
/// which is how stored fields are decoded (`StoredFieldsFormat`).
package enum DirectJSONDecoder {
    /// Thrown when the decoder cannot be sure to give `JSONDecoder`'s answer.
    package struct Declined: Error {}

    /// The deepest nesting decoded (containers within containers), and, separately, the
    /// deepest nesting of a skipped value: together below `JSONDecoder`'s own limit (512).
    package static let maximumDepth = 200

    /// Whether `decoder` decodes exactly as this one: default strategies, no user info.
    package static func canStandIn(for decoder: JSONDecoder) -> Bool {
        guard case .deferredToDate = decoder.dateDecodingStrategy,
              case .base64 = decoder.dataDecodingStrategy,
              case .throw = decoder.nonConformingFloatDecodingStrategy,
              case .useDefaultKeys = decoder.keyDecodingStrategy
        else { return false }
        return decoder.userInfo.isEmpty && !decoder.allowsJSON5 && !decoder.assumesTopLevelDictionary
    }

    /// Decodes `type` from `data`, which must hold one JSON object (white space around it
    /// allowed).
    ///
    /// - Throws: ``Declined`` when it cannot give `JSONDecoder`'s answer: decode with
    ///   `JSONDecoder` then.
    package static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try data.withUnsafeBytes { raw throws -> Value in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw Declined() }
            var scanner = JSONScanner(base: base, count: raw.count)
            scanner.skipWhitespace()
            guard scanner.peek == UInt8(ascii: "{") else { throw Declined() }
            let reader = DirectJSONReader(base: base, count: raw.count)
            defer { reader.invalidate() }
            // The top object's scan validates the whole input once; its members are kept
            // for the first container asked for it.
            let start = scanner.position
            let (members, end) = try reader.scanObject(at: start)
            scanner.position = end
            scanner.skipWhitespace()
            guard scanner.isAtEnd else { throw Declined() }
            reader.cache(members, at: start)
            let value = try reader.decode(type, DirectJSONReader.Span(start: start, end: end), key: nil)
            guard !reader.mustDecline else { throw Declined() }
            return value
        }
    }
}

/// The `Decoder` behind ``DirectJSONDecoder``: the bytes, the value being decoded, and the
/// coding path. One per decoded document; it reads through a pointer that is only valid
/// during ``DirectJSONDecoder/decode(_:from:)``, so it is invalidated when that returns,
/// and a decoder or container kept by a type's `init(from:)` declines from then on.
final class DirectJSONReader: Decoder, SingleValueDecodingContainer {
    /// A value's bytes: from its first byte to one past its last.
    struct Span {
        var start: Int
        var end: Int
    }

    /// One member of an object: its key (ASCII, no escapes) and its value.
    struct Member {
        var keyStart: Int
        var keyCount: Int
        var value: Span
    }

    private let base: UnsafePointer<UInt8>
    private let count: Int
    private var isValid = true
    /// The value a single-value container or `init(from:)` reads.
    private var current = Span(start: 0, end: 0)
    private var depth = 0
    private var cachedMembers: (start: Int, members: [Member])?
    /// Set when a non-throwing requirement (`contains`) could not be answered for sure.
    private(set) var mustDecline = false

    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        self.count = count
    }

    func invalidate() { isValid = false }

    func cache(_ members: [Member], at start: Int) { cachedMembers = (start, members) }

    func decline() { mustDecline = true }

    private func checkValid() throws {
        guard isValid else { throw DirectJSONDecoder.Declined() }
    }

    // MARK: Scanning

    /// The members of the object at `start` and the end of the object, validating every
    /// byte of it.
    func scanObject(at start: Int) throws -> (members: [Member], end: Int) {
        var scanner = JSONScanner(base: base, count: count, position: start)
        guard scanner.consume(UInt8(ascii: "{")) else { throw DirectJSONDecoder.Declined() }
        var members: [Member] = []
        members.reserveCapacity(8)
        scanner.skipWhitespace()
        if scanner.consume(UInt8(ascii: "}")) { return (members, scanner.position) }
        while true {
            scanner.skipWhitespace()
            guard let (keyStart, keyEnd, escaped) = scanner.scanString(), !escaped,
                  Self.isASCII(base + keyStart, keyEnd - keyStart),
                  scanner.consume(UInt8(ascii: ":"))
            else { throw DirectJSONDecoder.Declined() }
            scanner.skipWhitespace()
            let valueStart = scanner.position
            guard scanner.skipValue(maximumDepth: DirectJSONDecoder.maximumDepth) else {
                throw DirectJSONDecoder.Declined()
            }
            members.append(Member(
                keyStart: keyStart, keyCount: keyEnd - keyStart, value: Span(start: valueStart, end: scanner.position)))
            if scanner.consume(UInt8(ascii: ",")) { continue }
            guard scanner.consume(UInt8(ascii: "}")) else { throw DirectJSONDecoder.Declined() }
            return (members, scanner.position)
        }
    }

    /// The elements of the (validated) array at `span`.
    func scanArray(_ span: Span) throws -> [Span] {
        var scanner = JSONScanner(base: base, count: span.end, position: span.start)
        guard scanner.consume(UInt8(ascii: "[")) else { throw DirectJSONDecoder.Declined() }
        var elements: [Span] = []
        scanner.skipWhitespace()
        if scanner.consume(UInt8(ascii: "]")) { return elements }
        while true {
            scanner.skipWhitespace()
            let start = scanner.position
            guard scanner.skipValue(maximumDepth: DirectJSONDecoder.maximumDepth) else {
                throw DirectJSONDecoder.Declined()
            }
            elements.append(Span(start: start, end: scanner.position))
            if scanner.consume(UInt8(ascii: ",")) { continue }
            guard scanner.consume(UInt8(ascii: "]")) else { throw DirectJSONDecoder.Declined() }
            return elements
        }
    }

    /// The members of the (validated) object at `span`.
    func members(of span: Span) throws -> [Member] {
        if let cachedMembers, cachedMembers.start == span.start { return cachedMembers.members }
        return try scanObject(at: span.start).members
    }

    private static func isASCII(_ pointer: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        var index = 0
        while index < count {
            if pointer[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// Whether the member's key is `key`'s string value.
    func keyMatches(_ member: Member, _ key: UnsafeBufferPointer<UInt8>) -> Bool {
        member.keyCount == key.count && (key.count == 0 || memcmp(base + member.keyStart, key.baseAddress!, key.count) == 0)
    }

    /// The key of a member, as a string.
    func keyString(_ member: Member) -> String {
        String(decoding: UnsafeBufferPointer(start: base + member.keyStart, count: member.keyCount), as: UTF8.self)
    }

    // MARK: Scalars

    func isNull(_ span: Span) -> Bool {
        span.end - span.start == 4 && base[span.start] == UInt8(ascii: "n")
    }

    func bool(_ span: Span) throws -> Bool {
        try checkValid()
        switch (base[span.start], span.end - span.start) {
        case (UInt8(ascii: "t"), 4): return true
        case (UInt8(ascii: "f"), 5): return false
        default: throw DirectJSONDecoder.Declined()
        }
    }

    func string(_ span: Span) throws -> String {
        try checkValid()
        guard base[span.start] == UInt8(ascii: "\"") else { throw DirectJSONDecoder.Declined() }
        let contentStart = span.start + 1
        let contentCount = span.end - 1 - contentStart
        // Validated when its container was scanned: well-formed UTF-8, valid escapes.
        if contentCount == 0 || memchr(base + contentStart, Int32(UInt8(ascii: "\\")), contentCount) == nil {
            return String(decoding: UnsafeBufferPointer(start: base + contentStart, count: contentCount), as: UTF8.self)
        }
        var scanner = JSONScanner(base: base, count: span.end, position: span.start)
        guard let string = scanner.readString() else { throw DirectJSONDecoder.Declined() }
        return string
    }

    /// A UUID (`UUID`'s own decoding: a string, `UUID(uuidString:)`), read in place when it
    /// is in the canonical form.
    func uuid(_ span: Span) throws -> UUID {
        try checkValid()
        guard base[span.start] == UInt8(ascii: "\""), span.end - span.start >= 2 else { throw DirectJSONDecoder.Declined() }
        if let uuid = UUIDText.parse(UnsafeBufferPointer(start: base + span.start + 1, count: span.end - span.start - 2)) {
            return uuid
        }
        guard let uuid = UUID(uuidString: try string(span)) else { throw DirectJSONDecoder.Declined() }
        return uuid
    }

    /// An integer written as JSON digits only: no fraction, no exponent, no `-0`.
    func integer<Value: FixedWidthInteger>(_ span: Span, as type: Value.Type) throws -> Value {
        try checkValid()
        var index = span.start
        let negative = base[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < span.end, base[index] &- UInt8(ascii: "0") < 10 else { throw DirectJSONDecoder.Declined() }
        if base[index] == UInt8(ascii: "0"), negative || span.end - index > 1 { throw DirectJSONDecoder.Declined() }
        var magnitude: UInt64 = 0
        while index < span.end {
            let digit = base[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw DirectJSONDecoder.Declined() }
            let (times, overflowA) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(digit))
            guard !overflowA, !overflowB else { throw DirectJSONDecoder.Declined() }
            magnitude = sum
            index += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { throw DirectJSONDecoder.Declined() }
            let signed = magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
            guard let value = Value(exactly: signed) else { throw DirectJSONDecoder.Declined() }
            return value
        }
        guard let value = Value(exactly: magnitude) else { throw DirectJSONDecoder.Declined() }
        return value
    }

    /// A floating-point number, correctly rounded as `JSONDecoder`'s `strtod` does; declines
    /// on overflow and on a non-zero number that rounds to zero, which `JSONDecoder` refuses.
    func floatingPoint<Value: BinaryFloatingPoint & LosslessStringConvertible>(
        _ span: Span, as type: Value.Type
    ) throws -> Value {
        try checkValid()
        let first = base[span.start]
        guard first == UInt8(ascii: "-") || first &- UInt8(ascii: "0") < 10 else { throw DirectJSONDecoder.Declined() }
        // Up to 15 digits without fraction or exponent are exact as a Double; the text is
        // valid JSON (validated with its container).
        if Value.self == Double.self, span.end - span.start <= 16 {
            var index = span.start + (first == UInt8(ascii: "-") ? 1 : 0)
            var magnitude: Int64 = 0
            var digitsOnly = true
            while index < span.end {
                let digit = base[index] &- UInt8(ascii: "0")
                guard digit < 10 else {
                    digitsOnly = false
                    break
                }
                magnitude = magnitude * 10 + Int64(digit)
                index += 1
            }
            if digitsOnly {
                let value = Double(magnitude)
                return (first == UInt8(ascii: "-") ? -value : value) as! Value
            }
        }
        let text = String(decoding: UnsafeBufferPointer(start: base + span.start, count: span.end - span.start), as: UTF8.self)
        guard let value = Value(text), value.isFinite else { throw DirectJSONDecoder.Declined() }
        if value == 0 {
            // A true zero has no non-zero digit before its exponent.
            var index = span.start
            while index < span.end, base[index] | 0x20 != UInt8(ascii: "e") {
                if base[index] >= UInt8(ascii: "1") && base[index] <= UInt8(ascii: "9") { throw DirectJSONDecoder.Declined() }
                index += 1
            }
        }
        return value
    }

    // MARK: Values of any type

    /// Decodes the value at `span`, reached through `key` (`nil` at the top).
    func decode<Value: Decodable>(_ type: Value.Type, _ span: Span, key: (any CodingKey)?) throws -> Value {
        try checkValid()
        // JSONDecoder's own cases (default strategies), and the common scalars without a
        // container in between.
        if Value.self == String.self { return try string(span) as! Value }
        if Value.self == Date.self {
            return Date(timeIntervalSinceReferenceDate: try floatingPoint(span, as: Double.self)) as! Value
        }
        if Value.self == UUID.self { return try uuid(span) as! Value }
        if Value.self == Data.self {
            guard let data = Data(base64Encoded: try string(span)) else { throw DirectJSONDecoder.Declined() }
            return data as! Value
        }
        if Value.self == URL.self {
            guard let url = URL(string: try string(span)) else { throw DirectJSONDecoder.Declined() }
            return url as! Value
        }
        if Value.self == Decimal.self { throw DirectJSONDecoder.Declined() }
        guard depth < DirectJSONDecoder.maximumDepth else { throw DirectJSONDecoder.Declined() }
        let saved = current
        current = span
        depth += 1
        if let key { codingPath.append(key) }
        defer {
            current = saved
            depth -= 1
            if key != nil { codingPath.removeLast() }
        }
        return try Value(from: self)
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try keyedContainer(current, keyedBy: type, path: codingPath)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try unkeyedContainer(current, path: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        try checkValid()
        return self
    }

    func keyedContainer<Key: CodingKey>(
        _ span: Span, keyedBy type: Key.Type, path: [any CodingKey]
    ) throws -> KeyedDecodingContainer<Key> {
        try checkValid()
        guard base[span.start] == UInt8(ascii: "{") else { throw DirectJSONDecoder.Declined() }
        return KeyedDecodingContainer(DirectKeyedContainer<Key>(reader: self, members: try members(of: span), codingPath: path))
    }

    func unkeyedContainer(_ span: Span, path: [any CodingKey]) throws -> any UnkeyedDecodingContainer {
        try checkValid()
        guard base[span.start] == UInt8(ascii: "[") else { throw DirectJSONDecoder.Declined() }
        return DirectUnkeyedContainer(reader: self, elements: try scanArray(span), codingPath: path)
    }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool { isNull(current) }
    func decode(_ type: Bool.Type) throws -> Bool { try bool(current) }
    func decode(_ type: String.Type) throws -> String { try string(current) }
    func decode(_ type: Double.Type) throws -> Double { try floatingPoint(current, as: type) }
    func decode(_ type: Float.Type) throws -> Float { try floatingPoint(current, as: type) }
    func decode(_ type: Int.Type) throws -> Int { try integer(current, as: type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(current, as: type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(current, as: type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(current, as: type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(current, as: type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(current, as: type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(current, as: type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(current, as: type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(current, as: type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(current, as: type) }
    func decode<Value: Decodable>(_ type: Value.Type) throws -> Value { try decode(type, current, key: nil) }
}

/// A position in an array, as a coding key (for the coding path).
struct DirectIndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}
