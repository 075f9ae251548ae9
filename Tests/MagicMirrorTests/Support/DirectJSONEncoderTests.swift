import Foundation
import MagicMirror
import Testing

private struct Inner: Codable, Equatable {
    var name: String
    var weights: [Double]
}

private enum Flavor: String, Codable {
    case plain, spicy
}

private enum Level: Int, Codable {
    case low = 1, high = 9
}

private enum Shape: Codable {
    case circle(radius: Double)
    case box(Int, Int)
    case none
}

/// Every kind of value a record holds.
private struct Everything: Codable {
    var id: UUID
    var title: String
    var done: Bool
    var date: Date
    var count: Int
    var small: Int8
    var unsigned: UInt64
    var ratio: Double
    var single: Float
    var blob: Data
    var link: URL
    var note: String?
    var missing: Int?
    var tags: [String]
    var scores: [String: Int]
    var byNumber: [Int: String]
    var inner: Inner
    var inners: [Inner]
    var flavor: Flavor
    var level: Level
    var shape: Shape
    var other: Shape
    var nothing: Shape
    var nested: [[Int?]]
    var empties: Empties
    var wrapped: Wrapped
    var keyed: [Flavor: Int]

    static func make(_ index: Int) -> Everything {
        Everything(
            id: UUID(), title: "record \(index) / \"quoted\" \\ tab\t é 😀", done: index % 2 == 0,
            date: Date(timeIntervalSinceReferenceDate: 1_000.25 * Double(index)),
            count: index * 1_000_003 - 7, small: Int8(truncatingIfNeeded: index), unsigned: .max - UInt64(index),
            ratio: Double(index) / 7, single: Float(index) / 3, blob: Data((0..<(index % 9)).map { UInt8($0 * 31) }),
            link: URL(string: "https://example.com/path/\(index)?q=a b&x=1")!,
            note: index % 3 == 0 ? nil : "note \(index)", missing: index % 2 == 0 ? nil : index,
            tags: (0..<(index % 4)).map { "tag\($0)" }, scores: ["b": index, "a": -index, "B": 0, "_": 1, "10": 2, "9": 3],
            byNumber: [10: "ten", 9: "nine", -1: "minus one", 100: "hundred"],
            inner: Inner(name: "inner", weights: [0.1, 1e-7, 1e21]),
            inners: [Inner(name: "a", weights: []), Inner(name: "b", weights: [-0.0, 2])],
            flavor: index % 2 == 0 ? .plain : .spicy, level: .high,
            shape: .circle(radius: 2.5), other: .box(index, -index), nothing: .none,
            nested: [[1, nil], [], [nil]], empties: Empties(), wrapped: Wrapped(value: index),
            keyed: [.plain: 1, .spicy: 2])
    }
}

/// Empty containers of every kind.
private struct Empties: Codable {
    var array: [Int] = []
    var dictionary: [String: Int] = [:]
    var object = Nothing()
    var optionalArray: [Int?] = [nil]
}

/// A type that encodes no value at all (`JSONEncoder` writes `{}` for it when nested).
private struct Nothing: Codable {
    init() {}
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
}

/// A type with a custom `encode(to:)` that encodes a single value.
private struct Wrapped: Codable {
    var value: Int
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode("wrapped-\(value)")
    }
}

private struct Integers: Encodable {
    var int: Int, int8: Int8, int16: Int16, int32: Int32, int64: Int64
    var uint: UInt, uint8: UInt8, uint16: UInt16, uint32: UInt32, uint64: UInt64

    static let minimums = Integers(
        int: .min, int8: .min, int16: .min, int32: .min, int64: .min,
        uint: .min, uint8: .min, uint16: .min, uint32: .min, uint64: .min)
    static let maximums = Integers(
        int: .max, int8: .max, int16: .max, int32: .max, int64: .max,
        uint: .max, uint8: .max, uint16: .max, uint32: .max, uint64: .max)
}

private struct Floats: Encodable {
    var double: Double
    var float: Float
    var doubles: [Double]
    var floats: [Float]
}

private struct Text: Encodable {
    var text: String
}

private struct Keyed<Value: Encodable>: Encodable {
    var values: [String: Value]
}

/// A type that writes the members of its own object through `superEncoder` (declined).
private struct UsesSuperEncoder: Encodable {
    enum CodingKeys: String, CodingKey { case a }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .a)
        try 2.encode(to: container.superEncoder())
    }
}

/// A type that encodes one key twice (declined: `JSONEncoder` keeps the last).
private struct TwiceKeyed: Encodable {
    enum CodingKeys: String, CodingKey { case a }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .a)
        try container.encode(2, forKey: .a)
    }
}

/// A type that catches the encoder's refusal and encodes something else instead.
private struct CatchesErrors: Encodable {
    enum CodingKeys: String, CodingKey { case value, fallback }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        do {
            try container.encode(Double.nan, forKey: .value)
        } catch {
            try container.encode("no number", forKey: .fallback)
        }
    }
}

@Suite(.timeLimit(.minutes(5)), .enabled(if: DirectJSONEncoder.standsInOnThisPlatform))
struct DirectJSONEncoderTests {
    let encoder = StoredFieldsFormat.makeEncoder()

    /// Expects the direct encoder to give exactly `JSONEncoder`'s bytes for `value`.
    private func expectSameBytes<Value: Encodable>(
        _ value: Value, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let expected = try encoder.encode(value)
        let direct = try DirectJSONEncoder.encode(value)
        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: expected, as: UTF8.self),
                sourceLocation: sourceLocation)
        #expect(direct == expected, sourceLocation: sourceLocation)
    }

    /// Expects the direct encoder to decline `value`.
    private func expectDeclines<Value: Encodable>(
        _ value: Value, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(throws: DirectJSONEncoder.Declined.self, sourceLocation: sourceLocation) {
            try DirectJSONEncoder.encode(value)
        }
    }

    @Test func standsInForTheStoredFieldsEncoderOnly() {
        #expect(DirectJSONEncoder.canStandIn(for: encoder))
        #expect(!DirectJSONEncoder.canStandIn(for: JSONEncoder()))
        let pretty = StoredFieldsFormat.makeEncoder()
        pretty.outputFormatting = [.sortedKeys, .prettyPrinted]
        #expect(!DirectJSONEncoder.canStandIn(for: pretty))
        let slashes = StoredFieldsFormat.makeEncoder()
        slashes.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(!DirectJSONEncoder.canStandIn(for: slashes))
        let dates = StoredFieldsFormat.makeEncoder()
        dates.dateEncodingStrategy = .iso8601
        #expect(!DirectJSONEncoder.canStandIn(for: dates))
        let floats = StoredFieldsFormat.makeEncoder()
        floats.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        #expect(!DirectJSONEncoder.canStandIn(for: floats))
        let keys = StoredFieldsFormat.makeEncoder()
        keys.keyEncodingStrategy = .convertToSnakeCase
        #expect(!DirectJSONEncoder.canStandIn(for: keys))
    }

    @Test(arguments: 0..<40)
    func everyKindOfFieldGivesJSONEncodersBytes(index: Int) throws {
        try expectSameBytes(Everything.make(index))
    }

    @Test func integersAtTheirExtremes() throws {
        try expectSameBytes(Integers.minimums)
        try expectSameBytes(Integers.maximums)
        try expectSameBytes(Integers(
            int: 0, int8: -1, int16: 255, int32: -65_536, int64: 1 << 53,
            uint: 10, uint8: 128, uint16: 999, uint32: 1 << 31, uint64: 1 << 63))
    }

    @Test(arguments: [Double]([
        0.1, 1e-7, 1e21, 1e20, -0.0, 0, 1, -1, 100, 1e16, 1.2345678901234568e20, .leastNonzeroMagnitude,
        Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, Double.leastNormalMagnitude,
        1e-5, 0.0001, 123.456, 2.5e-8, 1.0 / 3, 9_007_199_254_740_992, 4_294_967_296.5,
    ]))
    func floatsAreFormattedAsJSONEncoderFormatsThem(value: Double) throws {
        let single = Float(value).isFinite ? Float(value) : 1
        try expectSameBytes(Floats(double: value, float: single, doubles: [value, -value], floats: [single]))
    }

    @Test func floatExtremes() throws {
        try expectSameBytes(Floats(
            double: .pi, float: .greatestFiniteMagnitude,
            doubles: [.ulpOfOne, .leastNonzeroMagnitude], floats: [.leastNonzeroMagnitude, .ulpOfOne, 16_777_216, 3.4e38]))
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func nonConformingFloatsDeclineAndJSONEncoderThrows(value: Double) {
        expectDeclines(Floats(double: value, float: 0, doubles: [], floats: []))
        expectDeclines(Floats(double: 0, float: Float(value), doubles: [], floats: []))
        expectDeclines(Floats(double: 0, float: 0, doubles: [1, value], floats: []))
        #expect(throws: EncodingError.self) {
            try encoder.encode(Floats(double: value, float: 0, doubles: [], floats: []))
        }
        // And the fallback gives JSONEncoder's error.
        #expect(throws: EncodingError.self) {
            try DirectJSONEncoder.encode(
                Floats(double: value, float: 0, doubles: [], floats: []), direct: true, orWith: encoder)
        }
    }

    @Test(arguments: [
        "", "plain", "a/b", "//", "\"quoted\"", "back\\slash", "\u{0}\u{1}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f}",
        "\u{7f}", "\u{2028}\u{2029}", "é", "e\u{301}", "😀👩‍👩‍👧", "日本語", "\u{FEFF}bom", "mixed / \" \\ \n 😀 end",
        String(repeating: "long text ", count: 200),
    ])
    func stringsAreEscapedAsJSONEncoderEscapesThem(text: String) throws {
        try expectSameBytes(Text(text: text))
        try expectSameBytes(Keyed(values: ["k": text]))
    }

    @Test func asciiKeysAreSortedAsJSONEncoderSortsThem() throws {
        let keys = ["b", "a", "B", "A", "_", "10", "9", "a10", "a9", "a1", "aa", "z", "Z", "~", " ", "-", "/", "key\"q"]
        try expectSameBytes(Keyed(values: Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0) })))
        try expectSameBytes(Keyed(values: [String: Int]()))
        try expectSameBytes([10: "ten", 9: "nine", -1: "minus", 100: "hundred"].mapKeys())
    }

    @Test func nonASCIIKeysDecline() {
        expectDeclines(Keyed(values: ["é": 1, "a": 2]))
        expectDeclines(Keyed(values: ["😀": 1]))
    }

    @Test func dateDataURLAndUUIDFollowTheDefaultStrategies() throws {
        struct Values: Encodable {
            var date: Date, dates: [Date], data: Data, emptyData: Data, url: URL, uuid: UUID, uuids: [UUID]
        }
        try expectSameBytes(Values(
            date: Date(timeIntervalSinceReferenceDate: 12.5), dates: [.distantPast, .distantFuture, Date(timeIntervalSince1970: 0)],
            data: Data((0...255).map { UInt8($0) }), emptyData: Data(),
            url: URL(string: "https://x.com/a%20b?q=1#frag")!, uuid: UUID(), uuids: [UUID(), UUID()]))
        let relative = URL(string: "child/file.json", relativeTo: URL(string: "https://x.com/base/"))!
        try expectSameBytes(["url": relative].mapKeys())
        try expectSameBytes(["file": URL(fileURLWithPath: "/tmp/a b/ç.txt")].mapKeys())
    }

    @Test func optionalsNilAndSome() throws {
        struct Optionals: Encodable {
            var none: Int?
            var some: Int?
            var nested: Int??
            var list: [String?]
            enum CodingKeys: String, CodingKey { case none, some, nested, list }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encodeIfPresent(none, forKey: .none)
                try container.encode(none, forKey: .some)
                try container.encodeIfPresent(some, forKey: .some)
                try container.encode(nested, forKey: .nested)
                try container.encode(list, forKey: .list)
            }
        }
        // `.some` is encoded twice: declined, JSONEncoder keeps the last.
        expectDeclines(Optionals(none: nil, some: 3, nested: .some(nil), list: [nil, "a"]))
        struct Plain: Encodable { var none: Int?; var some: Int?; var list: [String?] }
        try expectSameBytes(Plain(none: nil, some: 3, list: [nil, "a", nil]))
    }

    @Test func nestedContainersAndEmptyValues() throws {
        struct Manual: Encodable {
            enum CodingKeys: String, CodingKey { case object, list, empty }
            enum InnerKeys: String, CodingKey { case y, x }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                var object = container.nestedContainer(keyedBy: InnerKeys.self, forKey: .object)
                try object.encode(2, forKey: .y)
                try object.encode(1, forKey: .x)
                var list = container.nestedUnkeyedContainer(forKey: .list)
                try list.encode(1)
                var deeper = list.nestedContainer(keyedBy: InnerKeys.self)
                try deeper.encode("v", forKey: .x)
                var innerList = list.nestedUnkeyedContainer()
                try innerList.encodeNil()
                _ = container.nestedContainer(keyedBy: InnerKeys.self, forKey: .empty)
            }
        }
        try expectSameBytes(Manual())
        try expectSameBytes(Empties())
        try expectSameBytes(["nothing": Nothing()].mapKeys())
    }

    @Test func declinesWhatItCannotReproduce() {
        expectDeclines(["amount": Decimal(string: "1.5")!].mapKeys())
        expectDeclines(UsesSuperEncoder())
        expectDeclines(TwiceKeyed())
        expectDeclines(CatchesErrors())
        // Not an object at the top.
        expectDeclines([1, 2, 3])
        expectDeclines("text")
        expectDeclines(Nothing())
        // Deeper than the limit.
        var deep: Indirect = .leaf
        for _ in 0..<(DirectJSONEncoder.maximumDepth + 5) { deep = .node(deep) }
        expectDeclines(["deep": deep].mapKeys())
    }

    /// The differential check itself must be able to fail: a deliberately different output
    /// (`JSONEncoder` without escaped slashes) is caught byte for byte.
    @Test func aDifferenceIsCaught() throws {
        let other = StoredFieldsFormat.makeEncoder()
        other.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let value = Text(text: "a/b")
        #expect(try DirectJSONEncoder.encode(value) != other.encode(value))
        #expect(try DirectJSONEncoder.encode(value) == encoder.encode(value))
    }

    @Test func oneBatchEncodesDocumentAfterDocumentAfterADecline() throws {
        let batch = DirectJSONEncoder.Batch()
        for index in 0..<20 {
            if index % 5 == 2 {
                #expect(throws: DirectJSONEncoder.Declined.self) { try batch.encode(TwiceKeyed()) }
                #expect(throws: DirectJSONEncoder.Declined.self) {
                    try batch.encode(Floats(double: .nan, float: 0, doubles: [], floats: []))
                }
            }
            let value = Everything.make(index)
            #expect(try batch.encode(value) == encoder.encode(value))
        }
    }

    /// A writer keeps the order and quoted bytes of the last objects' keys for the next
    /// objects with the same keys: whatever the keys, their order, how many kinds of
    /// objects come one after the other or nest in one document, the bytes stay
    /// `JSONEncoder`'s, and a key given twice still declines.
    @Test func keptKeyOrdersGiveJSONEncodersBytes() throws {
        let batch = DirectJSONEncoder.Batch()
        // More kinds of objects than a writer keeps, each again and again.
        let kinds = (0..<(DirectJSONEncoder.keyOrdersKept + 4)).map { kind in
            (0...(kind % 5)).map { "k\((kind * 7 + $0 * 3) % 11)" } + ["kind\(kind)"]
        }
        for round in 0..<3 {
            for keys in kinds {
                for value in [InOrder(keys: keys), InOrder(keys: keys.reversed())] {
                    #expect(try batch.encode(value) == encoder.encode(value), "\(round) \(keys)")
                }
            }
        }
        // Objects nested in one document, more kinds than are kept, so that writing the
        // inner ones replaces the kept order of the outer one while it is being written.
        let nested = InOrder(kinds.enumerated().map { index, keys in
            ("n\(kinds.count - index)", .object(InOrder(keys: keys)))
        } + [("z", .number(1)), ("a", .number(2))])
        for _ in 0..<3 {
            #expect(try batch.encode(nested) == encoder.encode(nested))
        }
        // The same keys as kept ones, but one twice: declined, before and after.
        let twice = InOrder(keys: ["a", "b", "a"])
        for value in [InOrder(keys: ["a", "b", "c"]), twice, InOrder(keys: ["a", "b", "c"]), twice] {
            if value.members.map(\.key) == ["a", "b", "a"] {
                #expect(throws: DirectJSONEncoder.Declined.self) { try batch.encode(value) }
            } else {
                #expect(try batch.encode(value) == encoder.encode(value))
            }
        }
    }

    @Test func aContainerKeptFromAnEarlierDocumentDeclines() throws {
        let batch = DirectJSONEncoder.Batch()
        // UsesKept writes through the container Keeper kept and ignores its error: in
        // JSONEncoder's bytes there is no "b".
        _ = try encoder.encode(Keeper())
        #expect(String(decoding: try encoder.encode(UsesKept()), as: UTF8.self) == #"{"a":2}"#)
        // So the direct encoder must not give a document when the kept container is its own.
        #expect(try batch.encode(Keeper()) == Data(#"{"a":1}"#.utf8))
        #expect(throws: DirectJSONEncoder.Declined.self) { try batch.encode(UsesKept()) }
    }

    @Test func batchesEncodeDirectlyWithTheSameBytesAndIsolateAFailure() throws {
        var values = (0..<5_000).map { Floats(double: Double($0) / 10, float: 1, doubles: [], floats: []) }
        values[4_321].double = .nan
        let encoded = BatchJSONCoding.encode(values, with: encoder)
        #expect(encoded.count == values.count)
        for (index, value) in values.enumerated() where index != 4_321 {
            #expect(try encoded[index].get() == encoder.encode(value))
        }
        #expect(throws: EncodingError.self) { try encoded[4_321].get() }
    }

    /// Values of a part are encoded into one buffer: a value declined before or after some
    /// of its bytes were written leaves no trace there, and is encoded by `JSONEncoder`.
    @Test func aBatchsSharedBufferKeepsNothingOfADeclinedValue() throws {
        var values = (0..<5_000).map { BatchValue.plain($0) }
        for index in [0, 17, 2_600, 4_999] { values[index] = .nonASCIIKey }
        for index in [1, 18, 19, 3_333] { values[index] = .nestedDuplicate }
        let encoded = BatchJSONCoding.encode(values, with: encoder)
        #expect(encoded.count == values.count)
        var differences = 0
        for (index, value) in values.enumerated() where try encoded[index].get() != encoder.encode(value) {
            differences += 1
        }
        #expect(differences == 0)
    }
}

/// An object whose members are encoded in the order given: numbers, or objects of the same
/// kind.
private struct InOrder: Encodable {
    enum Value: Encodable {
        case number(Int)
        case object(InOrder)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .number(let number): try number.encode(to: encoder)
            case .object(let object): try object.encode(to: encoder)
            }
        }
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    var members: [(key: String, value: Value)]

    init(_ members: [(String, Value)]) { self.members = members.map { (key: $0.0, value: $0.1) } }

    /// Numbered members under `keys`, in that order.
    init(keys: [String]) { self.init(keys.enumerated().map { ($1, .number($0)) }) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (key, value) in members { try container.encode(value, forKey: Key(key)) }
    }
}

/// A record of a batch: plain, or one the direct encoder declines before writing anything
/// (a non-ASCII key) or after writing part of it (a duplicate key in a nested object).
private enum BatchValue: Encodable {
    case plain(Int)
    case nonASCIIKey
    case nestedDuplicate

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct Duplicate: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(1, forKey: Key("x"))
            try container.encode(2, forKey: Key("x"))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        switch self {
        case .plain(let number):
            try container.encode(number, forKey: Key("n"))
            try container.encode("text \(number)", forKey: Key("t"))
        case .nonASCIIKey:
            try container.encode(1, forKey: Key("é"))
        case .nestedDuplicate:
            try container.encode(1, forKey: Key("a"))
            try container.encode(Duplicate(), forKey: Key("b"))
        }
    }
}

/// A type that keeps its container after encoding (which it should not).
private struct Keeper: Encodable {
    enum CodingKeys: String, CodingKey { case a, b }
    nonisolated(unsafe) static var kept: KeyedEncodingContainer<CodingKeys>?
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .a)
        Self.kept = container
    }
}

/// A type that writes through the container `Keeper` kept.
private struct UsesKept: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keeper.CodingKeys.self)
        try container.encode(2, forKey: .a)
        try? Keeper.kept?.encode(3, forKey: .b)
    }
}

private indirect enum Indirect: Encodable {
    case leaf
    case node(Indirect)
}

extension Dictionary where Key == String, Value: Encodable {
    /// The dictionary as a keyed object (so that every top-level value is an object).
    fileprivate func mapKeys() -> Keyed<Value> { Keyed(values: self) }
}

extension Dictionary where Key == Int, Value: Encodable {
    /// The dictionary nested in an object.
    fileprivate func mapKeys() -> Keyed<[Int: Value]> { Keyed(values: ["numbers": self]) }
}
