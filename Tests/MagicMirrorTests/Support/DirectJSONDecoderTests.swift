import Foundation
import MagicMirror
import Testing

private struct Inner: Codable, Equatable, Hashable {
    var name: String
    var weights: [Double]
}

private enum Flavor: String, Codable, Equatable {
    case plain, spicy
}

private enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case box(Int, Int)
    case none
}

/// Every kind of value a record holds.
private struct Everything: Codable, Equatable {
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
    var inner: Inner
    var inners: [Inner]
    var flavor: Flavor
    var shape: Shape
    var other: Shape
    var set: Set<Int>
    var nested: [[Int?]]
}

private struct Item: Codable, Equatable {
    var id: String
    var n: Int
}

private struct Numbers: Codable, Equatable {
    var i: Int
    var d: Double
    var u8: UInt8
}

/// A type that keeps its decoder after decoding (which it should not).
private struct Keeper: Decodable {
    nonisolated(unsafe) static var kept: (any Decoder)?
    init(from decoder: any Decoder) throws {
        Self.kept = decoder
    }
}

@Suite(.timeLimit(.minutes(5))) struct DirectJSONDecoderTests {
    private let encoder = StoredFieldsFormat.makeEncoder()

    private func sample(_ index: Int) -> Everything {
        Everything(
            id: UUID(), title: "title \(index) \"quoted\" \\ tab\t é ✓ 𝄞 \u{0}", done: index % 2 == 0,
            date: Date(timeIntervalSinceReferenceDate: 785_000_000.123_456 + Double(index)),
            count: index * 1_000_003 - 7, small: -128, unsigned: .max, ratio: 0.1 + Double(index) / 3,
            single: Float(index) / 7, blob: Data((0..<index % 40).map { UInt8($0) }),
            link: URL(string: "https://example.com/a?b=\(index)")!, note: index % 3 == 0 ? nil : "note",
            missing: nil, tags: ["a", "", "c\n"], scores: ["x": index, "y": -index],
            inner: Inner(name: "in", weights: [1, 2.5, -3e-300, 1e300]), inners: [Inner(name: "a", weights: [])],
            flavor: .spicy, shape: .circle(radius: 2.5), other: .box(3, -4), set: [1, 2, 3],
            nested: [[1, nil], [], [3]])
    }

    /// What JSONDecoder gives for `json`, as the decoded value or nil for an error.
    private func reference<Value: Decodable>(_ type: Value.Type, _ json: String) -> Value? {
        try? JSONDecoder().decode(type, from: Data(json.utf8))
    }

    @Test func decodesEveryKindOfValueAsJSONDecoderDoes() throws {
        for index in 0..<50 {
            let data = try encoder.encode(sample(index))
            let direct = try DirectJSONDecoder.decode(Everything.self, from: data)
            #expect(direct == (try JSONDecoder().decode(Everything.self, from: data)))
            #expect(direct.title == sample(index).title)
        }
    }

    @Test func unknownStoredFieldsAreSkippedNotDeclined() throws {
        let json = #"{"$schemaVersion":3,"extra":{"deep":[1,{"x":null}],"s":"\u00e9"},"id":"a","n":5,"zz":[true,false]}"#
        #expect(try DirectJSONDecoder.decode(Item.self, from: Data(json.utf8)) == Item(id: "a", n: 5))
    }

    @Test func whiteSpaceAndMemberOrderDoNotMatter() throws {
        let json = " \n{ \"n\" : 7 ,\t\"id\" : \"b\" }\r\n"
        #expect(try DirectJSONDecoder.decode(Item.self, from: Data(json.utf8)) == Item(id: "b", n: 7))
    }

    /// Inputs at the edges: whatever the direct decoder gives, JSONDecoder gives the same;
    /// where it declines, JSONDecoder decides.
    @Test(arguments: [
        #"{"id":"a","n":1,"n":2}"#,                  // duplicate key: the first wins
        #"{"id":"a","n":-0}"#,
        #"{"id":"a","n":1.0}"#,
        #"{"id":"a","n":1e2}"#,
        #"{"id":"a","n":9223372036854775807}"#,
        #"{"id":"a","n":-9223372036854775808}"#,
        #"{"id":"a","n":9223372036854775808}"#,
        #"{"id":"a","n":01}"#,
        #"{"id":"a","n":null}"#,
        #"{"id":"a"}"#,
        #"{"id":"a","n":"1"}"#,
        #"{"i\u0064":"a","n":1}"#,                   // an escaped key
        #"{"id":"a\ud83d\ude00","n":1}"#,             // a surrogate pair
        #"{"id":"a\ud83d","n":1}"#,                   // a lone surrogate
        #"{"id":"a","n":1} x"#,
        #"{"id":"a","n":1,}"#,
        #"[{"id":"a","n":1}]"#,
        "\u{FEFF}{\"id\":\"a\",\"n\":1}",
        #"{"id":"a","n":1,"x":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}"#,
        #"{"id":"é","n":1,"é":2}"#,
    ])
    func edgeInputsNeverGiveAnotherValue(json: String) {
        let direct = try? DirectJSONDecoder.decode(Item.self, from: Data(json.utf8))
        if let direct { #expect(direct == reference(Item.self, json)) }
    }

    @Test(arguments: [
        #"{"i":1,"d":1e-400,"u8":1}"#,              // rounds to zero: JSONDecoder refuses
        #"{"i":1,"d":1e400,"u8":1}"#,
        #"{"i":1,"d":-0,"u8":1}"#,
        #"{"i":1,"d":0.0e5,"u8":1}"#,
        #"{"i":1,"d":12345678901234567,"u8":1}"#,
        #"{"i":1,"d":9007199254740993,"u8":1}"#,
        #"{"i":1,"d":2.2250738585072011e-308,"u8":1}"#,
        #"{"i":1,"d":0.1,"u8":256}"#,
        #"{"i":1,"d":0.1,"u8":-1}"#,
        #"{"i":-1,"d":-1.5E+3,"u8":255}"#,
    ])
    func numbersAreReadAsJSONDecoderReadsThem(json: String) {
        let direct = try? DirectJSONDecoder.decode(Numbers.self, from: Data(json.utf8))
        if let direct { #expect(direct == reference(Numbers.self, json)) }
        if reference(Numbers.self, json) == nil { #expect(direct == nil) }
    }

    @Test func negativeZeroKeepsItsSign() throws {
        let value = try DirectJSONDecoder.decode(Numbers.self, from: Data(#"{"i":0,"d":-0,"u8":0}"#.utf8))
        #expect(value.d == 0 && value.d.sign == .minus)
    }

    @Test(arguments: [
        #"{"i\u0064":"a","n":1}"#,
        #"{"id":"a","n":1.0}"#,
        #"{"id":"a","n":null}"#,
        #"{"id":"a"}"#,
        #"{"id":"a","n":1} x"#,
        #"{"id":"é","n":1,"é":2}"#,
    ])
    func declinesWhatItCannotBeSureOf(json: String) {
        #expect(throws: DirectJSONDecoder.Declined.self) {
            try DirectJSONDecoder.decode(Item.self, from: Data(json.utf8))
        }
    }

    @Test func aDecoderKeptAfterDecodingDeclines() throws {
        _ = try DirectJSONDecoder.decode(Keeper.self, from: Data(#"{"a":1}"#.utf8))
        let kept = try #require(Keeper.kept)
        #expect(throws: DirectJSONDecoder.Declined.self) { try kept.singleValueContainer() }
        Keeper.kept = nil
    }

    @Test func standsInOnlyForDefaultStrategies() {
        #expect(DirectJSONDecoder.canStandIn(for: JSONDecoder()))
        #expect(DirectJSONDecoder.canStandIn(for: StoredFieldsFormat.makeDecoder()))
        let dates = JSONDecoder()
        dates.dateDecodingStrategy = .secondsSince1970
        #expect(!DirectJSONDecoder.canStandIn(for: dates))
        let keys = JSONDecoder()
        keys.keyDecodingStrategy = .convertFromSnakeCase
        #expect(!DirectJSONDecoder.canStandIn(for: keys))
    }

    /// Packed, a large batch decoded in parts keeps each value in its record's order, with
    /// the tombstones and failures of every part as its missing positions, in order.
    @Test func aLargeBatchIsPackedInOrderAcrossItsParts() throws {
        let count = BatchJSONCoding.recordsPerParallelPart * 3 + 17
        let bad: Set = [0, 3, count / 3, count / 2, count / 2 + 1, count - 1]
        let records = (0..<count).map { index in
            StoredRecord(
                id: "r\(index)", version: 1,
                fields: index % 97 == 5 ? nil
                    : Data((bad.contains(index) ? #"{"id":"r","n":"x"}"# : #"{"id":"r\#(index)","n":\#(index)}"#).utf8),
                modified: .zero, writer: "w")
        }
        let decoded = BatchJSONCoding.decodeAll(records, as: Item.self, with: JSONDecoder())
        let live = (0..<count).filter { $0 % 97 != 5 && !bad.contains($0) }
        #expect(decoded.count == count)
        #expect(decoded.values == live.map { Item(id: "r\($0)", n: $0) })
        #expect(decoded.missing.map(\.position) == (0..<count).filter { $0 % 97 == 5 || bad.contains($0) })
        for (position, error) in decoded.missing {
            #expect((error is DecodingError) == bad.contains(position), "\(position)")
            #expect((decoded.error(at: position) is DecodingError) == bad.contains(position), "\(position)")
        }
        #expect(decoded.error(at: live[0]) == nil)
        let indices = decoded.valueIndices
        for (index, position) in live.enumerated() { #expect(indices[position] == index) }
    }

    /// One result per record and the packed form carry the same thing both ways.
    @Test func resultsAndThePackedFormCarryTheSameThing() throws {
        let results: [Result<Item, any Error>?] = [
            nil, .success(Item(id: "a", n: 1)), .failure(CocoaError(.coderReadCorrupt)), .success(Item(id: "b", n: 2)), nil,
        ]
        let packed = DecodedRecords(results)
        #expect(packed.values == [Item(id: "a", n: 1), Item(id: "b", n: 2)])
        #expect(packed.missing.map(\.position) == [0, 2, 4])
        #expect(packed.valueIndices == [-1, 0, -1, 1, -1])
        let back = packed.results
        #expect(back.count == 5)
        #expect(back[0] == nil && back[4] == nil)
        #expect(try back[1]?.get() == Item(id: "a", n: 1) && back[3].map { try? $0.get() } == Item(id: "b", n: 2))
        #expect(throws: CocoaError.self) { try back[2]?.get() }
        #expect(DecodedRecords<Item>([]).results.isEmpty)
    }

    /// A large batch is decoded in parts on several threads; every result lines up with its
    /// record, and a bad record fails alone with JSONDecoder's error.
    @Test func largeBatchesLineUpAndFailPerRecord() throws {
        let count = BatchJSONCoding.recordsPerParallelPart * 3 + 17
        var records = (0..<count).map { index in
            StoredRecord(
                id: "r\(index)", version: 1,
                fields: index % 97 == 5 ? nil : Data(#"{"id":"r\#(index)","n":\#(index)}"#.utf8),
                modified: .zero, writer: "w")
        }
        let bad = [3, count / 2, count - 1]
        for index in bad { records[index].fields = Data(#"{"id":"r","n":"x"}"#.utf8) }
        let decoded = BatchJSONCoding.decodeInOrder(records, as: Item.self, with: JSONDecoder())
        #expect(decoded.count == count)
        for (index, result) in decoded.enumerated() {
            if bad.contains(index) {
                #expect(throws: DecodingError.self) { try result?.get() }
            } else if index % 97 == 5 {
                #expect(result == nil)
            } else {
                #expect(try result?.get() == Item(id: "r\(index)", n: index))
            }
        }
    }
}
