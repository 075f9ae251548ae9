import Foundation

// Record ids are compared by their UTF-8 bytes, everywhere.
//
// Swift's `String` equality is canonical equivalence: `"e\u{301}" == "\u{e9}"`, and a
// `[String: …]` dictionary holds one entry for both. What is stored is bytes (journal lines,
// file names, PostgreSQL text under the C collation), where they are two records. So every
// table keyed by record id uses `IDKey`, through `IDMap` and `IDSet`, which read like the
// dictionary and set they replace.

/// A record id compared and hashed by its UTF-8 bytes.
package struct IDKey: Hashable, Sendable {
    package let id: String

    package init(_ id: String) { self.id = id }

    package static func == (lhs: IDKey, rhs: IDKey) -> Bool {
        guard lhs.id.utf8.count == rhs.id.utf8.count else { return false }
        var left = lhs.id
        var right = rhs.id
        return left.withUTF8 { left in
            right.withUTF8 { right in
                left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
            }
        }
    }

    /// Whether two ids are the same id: the same bytes.
    package static func same(_ lhs: String, _ rhs: String) -> Bool { IDKey(lhs) == IDKey(rhs) }

    package func hash(into hasher: inout Hasher) {
        var bytes = id
        bytes.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// A dictionary keyed by record ids compared by their bytes (see ``IDKey``).
package struct IDMap<Value>: Sequence {
    private var storage: [IDKey: Value]

    package init() { storage = [:] }

    package init(minimumCapacity: Int) { storage = Dictionary(minimumCapacity: minimumCapacity) }

    package subscript(id: String) -> Value? {
        get { storage[IDKey(id)] }
        set { storage[IDKey(id)] = newValue }
        _modify { yield &storage[IDKey(id)] }
    }

    package subscript(id: String, default defaultValue: @autoclosure () -> Value) -> Value {
        get { storage[IDKey(id), default: defaultValue()] }
        _modify { yield &storage[IDKey(id), default: defaultValue()] }
    }

    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.isEmpty }
    package var keys: LazyMapSequence<Dictionary<IDKey, Value>.Keys, String> { storage.keys.lazy.map(\.id) }
    package var values: Dictionary<IDKey, Value>.Values { storage.values }

    @discardableResult
    package mutating func removeValue(forKey id: String) -> Value? { storage.removeValue(forKey: IDKey(id)) }

    @discardableResult
    package mutating func updateValue(_ value: Value, forKey id: String) -> Value? {
        storage.updateValue(value, forKey: IDKey(id))
    }

    /// The entries whose value satisfies `isIncluded`.
    package func filter(_ isIncluded: (Value) throws -> Bool) rethrows -> IDMap<Value> {
        var kept = IDMap()
        kept.storage = try storage.filter { try isIncluded($0.value) }
        return kept
    }

    package mutating func removeAll(keepingCapacity: Bool = false) {
        storage.removeAll(keepingCapacity: keepingCapacity)
    }

    package mutating func reserveCapacity(_ capacity: Int) { storage.reserveCapacity(capacity) }

    package func makeIterator() -> some IteratorProtocol<(key: String, value: Value)> {
        storage.lazy.map { (key: $0.key.id, value: $0.value) }.makeIterator()
    }
}

extension IDMap: Sendable where Value: Sendable {}

extension IDMap: ExpressibleByDictionaryLiteral {
    package init(dictionaryLiteral elements: (String, Value)...) {
        storage = Dictionary(elements.map { (IDKey($0.0), $0.1) }, uniquingKeysWith: { $1 })
    }
}

extension IDMap: Equatable where Value: Equatable {}

/// A set of record ids compared by their bytes (see ``IDKey``).
package struct IDSet: Sequence, Sendable, Equatable, ExpressibleByArrayLiteral {
    private var storage: Set<IDKey>

    package init() { storage = [] }

    package init(_ ids: some Sequence<String>) { storage = Set(ids.lazy.map(IDKey.init)) }

    package init(arrayLiteral ids: String...) { self.init(ids) }

    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.isEmpty }

    package func contains(_ id: String) -> Bool { storage.contains(IDKey(id)) }

    @discardableResult
    package mutating func insert(_ id: String) -> (inserted: Bool, memberAfterInsert: String) {
        let (inserted, member) = storage.insert(IDKey(id))
        return (inserted, member.id)
    }

    @discardableResult
    package mutating func remove(_ id: String) -> String? { storage.remove(IDKey(id))?.id }

    package mutating func reserveCapacity(_ capacity: Int) { storage.reserveCapacity(capacity) }

    package func makeIterator() -> some IteratorProtocol<String> {
        storage.lazy.map(\.id).makeIterator()
    }
}
