import Foundation

/// An object being encoded: each member is added as (key, where its value lies) and sorted
/// when the document is written (see ``DirectJSONEncoder``).
struct DirectKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: DirectJSONWriter
    /// The document the container belongs to (see ``DirectJSONWriter/checkUsable(for:)``).
    let document: Int
    let object: Int
    let codingPath: [any CodingKey]

    private func add(_ key: Key, _ value: DirectJSONWriter.Slot) throws {
        try writer.checkUsable(for: document)
        let name = key.stringValue
        guard DirectJSONWriter.isASCII(name) else { throw writer.declined() }
        writer.objects[object].append(DirectJSONWriter.Member(key: name, value: value))
    }

    private func addText(_ key: Key, _ body: (inout [UInt8]) throws -> Void) throws {
        try writer.checkUsable(for: document)
        try add(key, writer.text(body))
    }

    mutating func encodeNil(forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendLiteral("null", to: &$0) }
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendLiteral(value ? "true" : "false", to: &$0) }
    }

    mutating func encode(_ value: String, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendEscaped(value, to: &$0) }
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        try addText(key) { try DirectJSONText.appendFloat(value, to: &$0) }
    }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        try addText(key) { try DirectJSONText.appendFloat(value, to: &$0) }
    }

    mutating func encode(_ value: Int, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int8, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int16, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int32, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int64, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt8, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt16, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt32, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt64, forKey key: Key) throws {
        try addText(key) { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode<Value: Encodable>(_ value: Value, forKey key: Key) throws {
        try add(key, writer.encodeNested(value, key: key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let index = writer.newObject()
        do { try add(key, .object(index)) } catch { writer.decline() }
        return KeyedEncodingContainer(DirectKeyedEncodingContainer<NestedKey>(
            writer: writer, document: document, object: index, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let index = writer.newArray()
        do { try add(key, .array(index)) } catch { writer.decline() }
        return DirectUnkeyedEncodingContainer(
            writer: writer, document: document, array: index, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        writer.decline()
        return writer
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        writer.decline()
        return writer
    }
}

/// An array being encoded: its elements in order.
struct DirectUnkeyedEncodingContainer: UnkeyedEncodingContainer, DirectScalarContainer {
    let writer: DirectJSONWriter
    /// The document the container belongs to (see ``DirectJSONWriter/checkUsable(for:)``).
    let document: Int
    let array: Int
    let codingPath: [any CodingKey]

    var count: Int { writer.arrays[array].count }

    private func add(_ value: DirectJSONWriter.Slot) throws {
        try writer.checkUsable(for: document)
        writer.arrays[array].append(value)
    }

    func putText(_ body: (inout [UInt8]) throws -> Void) throws {
        try writer.checkUsable(for: document)
        try add(writer.text(body))
    }

    mutating func encode<Value: Encodable>(_ value: Value) throws {
        try add(writer.encodeNested(value, key: DirectIndexKey(index: count)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        let index = writer.newObject()
        let path = codingPath + [DirectIndexKey(index: count)]
        do { try add(.object(index)) } catch { writer.decline() }
        return KeyedEncodingContainer(DirectKeyedEncodingContainer<NestedKey>(
            writer: writer, document: document, object: index, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let index = writer.newArray()
        let path = codingPath + [DirectIndexKey(index: count)]
        do { try add(.array(index)) } catch { writer.decline() }
        return DirectUnkeyedEncodingContainer(writer: writer, document: document, array: index, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        writer.decline()
        return writer
    }
}

/// The value being encoded, as one scalar or one nested value; encoding twice declines.
struct DirectSingleValueEncodingContainer: SingleValueEncodingContainer, DirectScalarContainer {
    let writer: DirectJSONWriter
    let codingPath: [any CodingKey]

    private func set(_ value: DirectJSONWriter.Slot) throws {
        guard case .pending = writer.current else { throw writer.declined() }
        writer.current = value
    }

    func putText(_ body: (inout [UInt8]) throws -> Void) throws {
        try writer.checkUsable()
        try set(writer.text(body))
    }

    mutating func encode<Value: Encodable>(_ value: Value) throws {
        guard case .pending = writer.current else { throw writer.declined() }
        let slot = try writer.encodeNested(value)
        // A value that encodes nothing would leave this container open for a second value.
        if case .pending = slot { throw writer.declined() }
        try set(slot)
    }
}

/// The scalars an unkeyed or a single-value container encodes, written alike: each puts
/// one value's JSON text where the container keeps its values.
protocol DirectScalarContainer {
    /// Writes one value's JSON text with `body` and keeps it as the container's next value.
    func putText(_ body: (inout [UInt8]) throws -> Void) throws
}

extension DirectScalarContainer {
    mutating func encodeNil() throws {
        try putText { DirectJSONText.appendLiteral("null", to: &$0) }
    }

    mutating func encode(_ value: Bool) throws {
        try putText { DirectJSONText.appendLiteral(value ? "true" : "false", to: &$0) }
    }

    mutating func encode(_ value: String) throws {
        try putText { DirectJSONText.appendEscaped(value, to: &$0) }
    }

    mutating func encode(_ value: Double) throws {
        try putText { try DirectJSONText.appendFloat(value, to: &$0) }
    }

    mutating func encode(_ value: Float) throws {
        try putText { try DirectJSONText.appendFloat(value, to: &$0) }
    }

    mutating func encode(_ value: Int) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int8) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int16) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int32) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: Int64) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt8) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt16) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt32) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }

    mutating func encode(_ value: UInt64) throws {
        try putText { DirectJSONText.appendDescription(value, to: &$0) }
    }
}
