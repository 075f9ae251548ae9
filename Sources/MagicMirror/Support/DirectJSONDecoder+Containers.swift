import Foundation

/// An object's members, found by comparing key bytes (see ``DirectJSONDecoder``).
struct DirectKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let reader: DirectJSONReader
    let members: [DirectJSONReader.Member]
    let codingPath: [any CodingKey]
    /// For large objects (dictionaries), the first member of each key.
    private let index: [String: Int]?

    /// Above this many members, keys are looked up in a table instead of a scan.
    static var scanLimit: Int { 24 }

    init(reader: DirectJSONReader, members: [DirectJSONReader.Member], codingPath: [any CodingKey]) {
        self.reader = reader
        self.members = members
        self.codingPath = codingPath
        if members.count > Self.scanLimit {
            var index: [String: Int] = [:]
            index.reserveCapacity(members.count)
            for (position, member) in members.enumerated() where index[reader.keyString(member)] == nil {
                index[reader.keyString(member)] = position
            }
            self.index = index
        } else {
            index = nil
        }
    }

    /// The first member whose key is `key` (duplicates: the first wins, as in
    /// `JSONDecoder`); `nil` when there is none. Member keys are ASCII, so bytes decide,
    /// except for a key that is not ASCII: then the reader must decline.
    private func member(_ key: Key) -> DirectJSONReader.Member? {
        var name = key.stringValue
        if let index {
            if let position = index[name] { return members[position] }
        } else {
            let found = name.withUTF8 { bytes -> DirectJSONReader.Member? in
                for member in members where reader.keyMatches(member, bytes) { return member }
                return nil
            }
            if let found { return found }
        }
        if !name.utf8.allSatisfy({ $0 < 0x80 }) { reader.decline() }
        return nil
    }

    private func value(_ key: Key) throws -> DirectJSONReader.Span {
        guard let member = member(key) else { throw DirectJSONDecoder.Declined() }
        return member.value
    }

    /// The value of `key`, or `nil` when it is missing or `null`.
    private func valueIfPresent(_ key: Key) -> DirectJSONReader.Span? {
        guard let member = member(key), !reader.isNull(member.value) else { return nil }
        return member.value
    }

    var allKeys: [Key] {
        var seen = Set<String>()
        return members.compactMap { member in
            let name = reader.keyString(member)
            guard seen.insert(name).inserted else { return nil }
            return Key(stringValue: name)
        }
    }

    func contains(_ key: Key) -> Bool { member(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { reader.isNull(try value(key)) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try reader.bool(value(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try reader.string(value(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try reader.floatingPoint(value(key), as: type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try reader.floatingPoint(value(key), as: type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try reader.integer(value(key), as: type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try reader.integer(value(key), as: type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try reader.integer(value(key), as: type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try reader.integer(value(key), as: type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try reader.integer(value(key), as: type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try reader.integer(value(key), as: type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try reader.integer(value(key), as: type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try reader.integer(value(key), as: type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try reader.integer(value(key), as: type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try reader.integer(value(key), as: type) }

    func decode<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value {
        try reader.decode(type, value(key), key: key)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        try valueIfPresent(key).map(reader.bool)
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try valueIfPresent(key).map(reader.string)
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try valueIfPresent(key).map { try reader.floatingPoint($0, as: type) }
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        try valueIfPresent(key).map { try reader.integer($0, as: type) }
    }

    func decodeIfPresent<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value? {
        try valueIfPresent(key).map { try reader.decode(type, $0, key: key) }
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try reader.keyedContainer(value(key), keyedBy: type, path: codingPath + [key])
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try reader.unkeyedContainer(value(key), path: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder { throw DirectJSONDecoder.Declined() }

    func superDecoder(forKey key: Key) throws -> any Decoder { throw DirectJSONDecoder.Declined() }
}

/// An array's elements, in order (see ``DirectJSONDecoder``).
struct DirectUnkeyedContainer: UnkeyedDecodingContainer {
    let reader: DirectJSONReader
    let elements: [DirectJSONReader.Span]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(reader: DirectJSONReader, elements: [DirectJSONReader.Span], codingPath: [any CodingKey]) {
        self.reader = reader
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// The next element; the index moves past it only once it decoded.
    private func next() throws -> DirectJSONReader.Span {
        guard currentIndex < elements.count else { throw DirectJSONDecoder.Declined() }
        return elements[currentIndex]
    }

    private mutating func advance<Value>(_ value: Value) -> Value {
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard reader.isNull(try next()) else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { advance(try reader.bool(next())) }
    mutating func decode(_ type: String.Type) throws -> String { advance(try reader.string(next())) }
    mutating func decode(_ type: Double.Type) throws -> Double { advance(try reader.floatingPoint(next(), as: type)) }
    mutating func decode(_ type: Float.Type) throws -> Float { advance(try reader.floatingPoint(next(), as: type)) }
    mutating func decode(_ type: Int.Type) throws -> Int { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { advance(try reader.integer(next(), as: type)) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { advance(try reader.integer(next(), as: type)) }

    mutating func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
        advance(try reader.decode(type, next(), key: DirectIndexKey(index: currentIndex)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        advance(try reader.keyedContainer(next(), keyedBy: type, path: codingPath + [DirectIndexKey(index: currentIndex)]))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        advance(try reader.unkeyedContainer(next(), path: codingPath + [DirectIndexKey(index: currentIndex)]))
    }

    mutating func superDecoder() throws -> any Decoder { throw DirectJSONDecoder.Declined() }
}
