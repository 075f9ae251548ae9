import Foundation
import MirrorTestSupport
import Synchronization
import Testing

@testable import MagicMirror

/// The key orders `DirectJSONEncoder` keeps per type: the bytes are JSONEncoder's for every
/// shape, and an order is never reused for other keys.
@Suite(.timeLimit(.minutes(5))) struct DirectJSONEncoderKeyOrderTests {

    /// A JSON value whose objects encode their members in the order given (possibly twice).
    indirect enum Node: Encodable {
        case number(Int)
        case text(String)
        case list([Node])
        case object([(String, Node)])

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .number(let value):
                var container = encoder.singleValueContainer()
                try container.encode(value)
            case .text(let value):
                var container = encoder.singleValueContainer()
                try container.encode(value)
            case .list(let values):
                var container = encoder.unkeyedContainer()
                for value in values { try container.encode(value) }
            case .object(let members):
                var container = encoder.container(keyedBy: Key.self)
                for (key, value) in members { try container.encode(value, forKey: Key(stringValue: key)) }
            }
        }

        var hasDuplicateKeys: Bool {
            switch self {
            case .number, .text: return false
            case .list(let values): return values.contains { $0.hasDuplicateKeys }
            case .object(let members):
                return Set(members.map(\.0)).count != members.count || members.contains { $0.1.hasDuplicateKeys }
            }
        }
    }


    private static let keyPool = [
        "a", "b", "A", "B", "id", "title", "", " ", "a b", "a/b", "q\"", "b\\s", "t\t", "n\n", "\u{1}",
        "10", "9", "1", "_", "~", "z", "Z", "aa", "ab", "a\r\n", "$schemaVersion",
    ]

    private static func node(_ depth: Int, _ generator: inout SplitMix64, duplicates: Bool) -> Node {
        switch depth > 3 ? Int.random(in: 0..<2, using: &generator) : Int.random(in: 0..<5, using: &generator) {
        case 0: return .number(Int.random(in: -5...5, using: &generator))
        case 1: return .text(keyPool.randomElement(using: &generator)!)
        case 2: return .list((0..<Int.random(in: 0..<4, using: &generator)).map { _ in
            node(depth + 1, &generator, duplicates: duplicates) })
        default:
            var keys = Array(keyPool.shuffled(using: &generator).prefix(Int.random(in: 0..<7, using: &generator)))
            if duplicates, !keys.isEmpty, Int.random(in: 0..<4, using: &generator) == 0 {
                keys.insert(keys.randomElement(using: &generator)!, at: Int.random(in: 0...keys.count, using: &generator))
            }
            return .object(keys.map { ($0, node(depth + 1, &generator, duplicates: duplicates)) })
        }
    }

    /// Many documents of many shapes (more than the orders kept), the same keys in other
    /// orders, nested and empty objects, one batch writer after the other: every document
    /// is JSONEncoder's bytes, or declined when an object has a key twice.
    @Test func keptKeyOrdersGiveJSONEncodersBytesForEveryShape() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var generator = SplitMix64(seed: 9)
        let batch = DirectJSONEncoder.Batch()
        var shapes: [Node] = []
        for _ in 0..<40 {
            var keys = Array(Self.keyPool.shuffled(using: &generator).prefix(5))
            shapes.append(.object(keys.map { ($0, .number(1)) }))
            keys.reverse()
            shapes.append(.object(keys.map { ($0, .object([("x", .number(2)), ("b", .object([]))])) }))
        }
        var documents: [Node] = []
        for index in 0..<3_000 {
            let inner = Self.node(0, &generator, duplicates: index % 3 == 0)
            documents.append(.object([("inner", inner), ("z", shapes[index % shapes.count]), ("a", .number(index))]))
            documents.append(shapes[(index * 7) % shapes.count])
            documents.append(.object([]))
        }
        var checked = 0
        for document in documents {
            let expected = try encoder.encode(document)
            do {
                let direct = try batch.encode(document)
                #expect(!document.hasDuplicateKeys, "a key twice was not declined")
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
                checked += 1
            } catch is DirectJSONEncoder.Declined {
                #expect(document.hasDuplicateKeys, "declined: \(String(decoding: expected, as: UTF8.self))")
            }
        }
        #expect(checked > 6_000)
    }

    /// An object with the keys of a kept order and one more (or one fewer), and an object
    /// with the kept keys but one of them twice in place of another.
    @Test func keptKeyOrdersAreNotReusedForOtherKeys() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let batch = DirectJSONEncoder.Batch()
        let documents: [Node] = [
            .object([("b", .number(1)), ("a", .number(2))]),
            .object([("b", .number(1)), ("a", .number(2)), ("c", .number(3))]),
            .object([("b", .number(1))]),
            .object([("b", .number(1)), ("b", .number(2))]),
            .object([("a", .number(1)), ("a", .number(2))]),
            .object([("b", .number(1)), ("a", .number(2))]),
        ]
        for document in documents {
            do {
                let direct = try batch.encode(document)
                #expect(!document.hasDuplicateKeys)
                #expect(direct == (try encoder.encode(document)))
            } catch is DirectJSONEncoder.Declined {
                #expect(document.hasDuplicateKeys)
            }
        }
    }
}
