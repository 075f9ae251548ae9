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
///
/// Its entries lie in two dense arrays (ids and values), found through an open-addressing
/// table of 8-byte slots (linear probing, at most 3/4 full), each holding 32 bits of the
/// id's hash and the entry's position. A `Dictionary` keeps its buckets at most 3/4 full
/// too, but each bucket holds a whole key and value: at 100,000 `StoredRecord`s (just past
/// a doubling, 262,144 buckets) that is about 28 MiB, where this takes about 13. A mirror and
/// its database keep several tables with one entry per record, so their memory is most of
/// what opening a large zone costs.
///
/// Removing an entry moves the last one into its place, so the order of iteration is
/// arbitrary, as a dictionary's is.
package struct IDMap<Value>: Sequence {
    /// The entries' ids and values, at the same positions.
    private var ids: [String] = []
    private var entries: [Value] = []
    /// `0` for an empty slot, else the id's 32 hash bits above the entry's position + 1.
    /// Its count is 0 or a power of two.
    private var slots: [UInt64] = []

    package init() {}

    package init(minimumCapacity: Int) { reserveCapacity(minimumCapacity) }

    /// A map of `values` under `ids` (one id per value, at the same position), which become
    /// its entries as they are (shared, not copied); `nil` when an id appears twice.
    ///
    /// Faster than inserting the entries one by one: each id is hashed once and nothing is
    /// appended.
    package init?(ids: [String], values: [Value]) {
        precondition(ids.count == values.count, "one id per value")
        let slotCount = Self.slotCount(for: ids.count)
        let mask = slotCount - 1
        var table = [UInt64](repeating: 0, count: slotCount)
        for (index, id) in ids.enumerated() {
            let hash = Self.hash(id)
            var slot = Int(truncatingIfNeeded: hash) & mask
            while table[slot] != 0 {
                let content = table[slot]
                if content >> 32 == hash, IDKey.same(ids[Int(truncatingIfNeeded: content & 0xFFFF_FFFF) - 1], id) {
                    return nil
                }
                slot = (slot + 1) & mask
            }
            table[slot] = hash << 32 | UInt64(index + 1)
        }
        self.ids = ids
        self.entries = values
        self.slots = table
    }

    /// A map with the ids of `other`, at the same positions, and `values` (one per id, in
    /// the order of `other`'s ids): the ids and the table that finds them are `other`'s,
    /// shared (copied on write), not hashed again.
    package init<Other>(sameKeysAs other: IDMap<Other>, values: [Value]) {
        precondition(values.count == other.count, "one value per id")
        self.ids = other.ids
        self.entries = values
        self.slots = other.slots
    }

    package subscript(id: String) -> Value? {
        get {
            guard let position = find(id, hash: Self.hash(id)).position else { return nil }
            return entries[position]
        }
        set {
            let hash = Self.hash(id)
            let (slot, position) = find(id, hash: hash)
            switch (position, newValue) {
            case (let position?, let value?): entries[position] = value
            case (let position?, nil): remove(slot: slot, position: position)
            case (nil, let value?): insert(id, value, hash: hash, slot: slot)
            case (nil, nil): break
            }
        }
        _modify {
            let hash = Self.hash(id)
            let (slot, position) = find(id, hash: hash)
            if let position {
                // Move the value out of the array (no copy, so that the caller changes it
                // in place), from the last position, which the array can give up.
                let last = entries.count - 1
                let lastSlot = position == last ? slot : swapWithLast(slot: slot, position: position)
                var value: Value? = entries.removeLast()
                defer {
                    if let value {
                        entries.append(value)
                    } else {
                        // The entry is the last one and its value is gone already.
                        clear(slot: lastSlot)
                        ids.removeLast()
                    }
                }
                yield &value
            } else {
                var value: Value?
                defer { if let value { insert(id, value, hash: hash, slot: slot) } }
                yield &value
            }
        }
    }

    package subscript(id: String, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[id] ?? defaultValue() }
        _modify {
            let hash = Self.hash(id)
            let (slot, found) = find(id, hash: hash)
            let position: Int
            if let found {
                position = found
            } else {
                insert(id, defaultValue(), hash: hash, slot: slot)
                position = entries.count - 1
            }
            yield &entries[position]
        }
    }

    package var count: Int { ids.count }
    package var isEmpty: Bool { ids.isEmpty }
    /// The ids, in the order of iteration.
    package var keys: [String] { ids }
    /// The values, in the order of iteration.
    package var values: [Value] { entries }

    @discardableResult
    package mutating func removeValue(forKey id: String) -> Value? {
        let (slot, position) = find(id, hash: Self.hash(id))
        guard let position else { return nil }
        let value = entries[position]
        remove(slot: slot, position: position)
        return value
    }

    @discardableResult
    package mutating func updateValue(_ value: Value, forKey id: String) -> Value? {
        let hash = Self.hash(id)
        let (slot, position) = find(id, hash: hash)
        if let position {
            let old = entries[position]
            entries[position] = value
            return old
        }
        insert(id, value, hash: hash, slot: slot)
        return nil
    }

    /// The entries whose value satisfies `isIncluded`.
    package func filter(_ isIncluded: (Value) throws -> Bool) rethrows -> IDMap<Value> {
        var kept = IDMap()
        for (id, value) in zip(ids, entries) where try isIncluded(value) { kept[id] = value }
        return kept
    }

    package mutating func removeAll(keepingCapacity: Bool = false) {
        ids.removeAll(keepingCapacity: keepingCapacity)
        entries.removeAll(keepingCapacity: keepingCapacity)
        if keepingCapacity {
            for index in slots.indices { slots[index] = 0 }
        } else {
            slots = []
        }
    }

    /// Makes room for `capacity` entries. Grows at least twofold when it grows, so that
    /// reserving one more before each insertion (as a commit of one record does) stays
    /// amortized constant time: `Array.reserveCapacity` allocates exactly what is asked,
    /// and asking for one more each time would copy every entry each time.
    package mutating func reserveCapacity(_ capacity: Int) {
        guard capacity > ids.capacity else { return }
        let target = Swift.max(capacity, 2 * ids.capacity)
        ids.reserveCapacity(target)
        entries.reserveCapacity(target)
        if Self.slotCount(for: target) > slots.count { rehash(slotCount: Self.slotCount(for: target)) }
    }

    /// Whether both hold their entries in the same storage: one is a copy of the other
    /// that neither has changed since (copy on write).
    package func sharesStorage(with other: IDMap) -> Bool {
        guard !ids.isEmpty else { return false }
        return ids.withUnsafeBufferPointer { mine in
            other.ids.withUnsafeBufferPointer { theirs in mine.baseAddress == theirs.baseAddress }
        }
    }

    /// How many entries fit before the next reallocation.
    package var capacity: Int { Swift.min(ids.capacity, entries.capacity) }

    package func makeIterator() -> some IteratorProtocol<(key: String, value: Value)> {
        zip(ids, entries).lazy.map { (key: $0.0, value: $0.1) }.makeIterator()
    }

    // MARK: The table

    /// The 32 hash bits kept in a slot: those of the id's bytes (as ``IDKey`` hashes them).
    private static func hash(_ id: String) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: IDKey(id).hashValue))
    }

    /// The fewest slots (a power of two, at least 8) that hold `count` entries at most 3/4 full.
    private static func slotCount(for count: Int) -> Int {
        var slots = 8
        while slots / 4 * 3 < count { slots *= 2 }
        return slots
    }

    /// The slot of `id` and its entry's position, or the empty slot where it would go.
    private func find(_ id: String, hash: UInt64) -> (slot: Int, position: Int?) {
        guard !slots.isEmpty else { return (0, nil) }
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let content = slots[slot]
            if content == 0 { return (slot, nil) }
            if content >> 32 == hash {
                let position = Int(truncatingIfNeeded: content & 0xFFFF_FFFF) - 1
                if IDKey.same(ids[position], id) { return (slot, position) }
            }
            slot = (slot + 1) & mask
        }
    }

    /// The slot that points at `position`.
    private func slot(of position: Int) -> Int {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: Self.hash(ids[position])) & mask
        while Int(truncatingIfNeeded: slots[slot] & 0xFFFF_FFFF) != position + 1 { slot = (slot + 1) & mask }
        return slot
    }

    private mutating func insert(_ id: String, _ value: Value, hash: UInt64, slot: Int) {
        var slot = slot
        if slots.isEmpty || (ids.count + 1) > slots.count / 4 * 3 {
            rehash(slotCount: Self.slotCount(for: ids.count + 1))
            slot = find(id, hash: hash).slot
        }
        ids.append(id)
        entries.append(value)
        slots[slot] = hash << 32 | UInt64(ids.count)
    }

    /// Removes the entry at `position`, found at `slot`: empties the slot (shifting back the
    /// slots after it that belong before it) and moves the last entry into the position.
    private mutating func remove(slot: Int, position: Int) {
        clear(slot: slot)
        let last = ids.count - 1
        if position != last {
            let lastSlot = self.slot(of: last)
            slots[lastSlot] = slots[lastSlot] & ~0xFFFF_FFFF | UInt64(position + 1)
            ids.swapAt(position, last)
            entries.swapAt(position, last)
        }
        ids.removeLast()
        entries.removeLast()
    }

    /// Empties `slot`, shifting back the slots after it that belong before it (so that every
    /// entry stays reachable from its home slot without a gap).
    private mutating func clear(slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var next = slot
        while true {
            next = (next + 1) & mask
            let content = slots[next]
            if content == 0 { break }
            let home = Int(truncatingIfNeeded: content >> 32) & mask
            if (next - home) & mask >= (next - hole) & mask {
                slots[hole] = content
                hole = next
            }
        }
        slots[hole] = 0
    }

    /// Swaps the entry at `position` (found at `slot`) with the last one; returns the slot
    /// that points at the last position.
    private mutating func swapWithLast(slot: Int, position: Int) -> Int {
        let last = ids.count - 1
        let lastSlot = self.slot(of: last)
        slots[lastSlot] = slots[lastSlot] & ~0xFFFF_FFFF | UInt64(position + 1)
        slots[slot] = slots[slot] & ~0xFFFF_FFFF | UInt64(last + 1)
        ids.swapAt(position, last)
        entries.swapAt(position, last)
        return slot
    }

    private mutating func rehash(slotCount: Int) {
        var table = [UInt64](repeating: 0, count: slotCount)
        let mask = slotCount - 1
        for content in slots where content != 0 {
            var slot = Int(truncatingIfNeeded: content >> 32) & mask
            while table[slot] != 0 { slot = (slot + 1) & mask }
            table[slot] = content
        }
        slots = table
    }
}

extension IDMap: Sendable where Value: Sendable {}

extension IDMap: ExpressibleByDictionaryLiteral {
    /// A map of the given entries; a later entry for an id replaces an earlier one.
    package init(dictionaryLiteral elements: (String, Value)...) {
        self.init(minimumCapacity: elements.count)
        for (id, value) in elements { self[id] = value }
    }
}

extension IDMap: Equatable where Value: Equatable {
    /// Whether both hold the same ids with equal values, in whatever order.
    package static func == (lhs: IDMap, rhs: IDMap) -> Bool {
        lhs.count == rhs.count && lhs.allSatisfy { rhs[$0.key] == $0.value }
    }
}

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
