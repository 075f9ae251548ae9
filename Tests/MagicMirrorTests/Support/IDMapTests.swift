import MagicMirror
import Testing

/// `IDMap`, the dense id table under the zone state and the mirror's tables: it must behave
/// as the dictionary it replaces, through growth, removals that move entries and in-place
/// changes.
@Suite(.timeLimit(.minutes(5))) struct IDMapTests {
    /// Ids that share prefixes and lengths, so that hash bits and probe runs collide in a
    /// small table.
    private static func id(_ number: Int) -> String { "record-\(number % 7)-\(number)" }

    @Test func behavesAsADictionaryThroughInsertsUpdatesAndRemovals() {
        var map = IDMap<Int>()
        var model: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let id = Self.id(Int.random(in: 0..<600, using: &generator))
            switch Int.random(in: 0..<6, using: &generator) {
            case 0, 1:
                map[id] = step
                model[id] = step
            case 2:
                #expect(map.removeValue(forKey: id) == model.removeValue(forKey: id))
            case 3:
                #expect(map.updateValue(step, forKey: id) == model.updateValue(step, forKey: id))
            case 4:
                // An in-place change through `_modify`: add, change or remove.
                let remove = step % 3 == 0
                map[id]? += 1
                model[id]? += 1
                if remove {
                    map[id] = nil
                    model[id] = nil
                }
            default:
                map[id, default: 0] += 2
                model[id, default: 0] += 2
            }
            #expect(map.count == model.count)
        }
        for (id, value) in model { #expect(map[id] == value) }
        #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == model)
        #expect(Set(map.keys) == Set(model.keys))
        #expect(map.values.sorted() == model.values.sorted())
    }

    @Test func aMapBuiltFromArraysBehavesAsOneBuiltByInserting() throws {
        let ids = (0..<3_000).map(Self.id)
        let values = Array(ids.indices)
        var built = try #require(IDMap(ids: ids, values: values))
        var model: [String: Int] = [:]
        for (id, value) in zip(ids, values) { model[id] = value }
        #expect(built.count == model.count)
        for (id, value) in model { #expect(built[id] == value) }
        #expect(built["absent"] == nil)
        // It grows, removes and changes in place as any other.
        for number in 3_000..<3_500 {
            built[Self.id(number)] = number
            model[Self.id(number)] = number
        }
        for number in stride(from: 0, to: 3_500, by: 3) {
            #expect(built.removeValue(forKey: Self.id(number)) == model.removeValue(forKey: Self.id(number)))
        }
        built[Self.id(1)]? += 10
        model[Self.id(1)]? += 10
        #expect(built.count == model.count)
        for (id, value) in model { #expect(built[id] == value) }
        #expect(ids.count == 3_000 && values.count == 3_000, "the arrays it was built from are left as they were")
        let empty = try #require(IDMap<Int>(ids: [], values: []))
        #expect(empty.isEmpty && empty["a"] == nil)
    }

    /// A map made with another's keys finds each id's own value, and either map changing
    /// (adding, removing, growing) leaves the other as it was.
    @Test func aMapWithAnothersKeysFindsItsOwnValuesAndChangesApart() throws {
        let ids = (0..<500).map(Self.id)
        var other = try #require(IDMap(ids: ids, values: ids.map { $0 + "!" }))
        var map = IDMap<Int>(sameKeysAs: other, values: Array(0..<ids.count))
        #expect(map.keys == ids)
        for (position, id) in ids.enumerated() { #expect(map[id] == position) }
        #expect(map["absent"] == nil)

        for number in 500..<900 { map[Self.id(number)] = number }
        for id in ids.prefix(100) { map[id] = nil }
        other[Self.id(0)] = "changed"
        other[Self.id(1)] = nil
        #expect(other.count == ids.count - 1 && other[Self.id(0)] == "changed" && other[Self.id(1)] == nil)
        for id in ids.dropFirst(2) { #expect(other[id] == id + "!") }
        for number in 500..<900 { #expect(other[Self.id(number)] == nil) }
        #expect(map.count == 800)
        for (position, id) in ids.enumerated() { #expect(map[id] == (position < 100 ? nil : position)) }
        for number in 500..<900 { #expect(map[Self.id(number)] == number) }
    }

    @Test func aMapIsNotBuiltFromArraysThatListAnIdTwice() {
        #expect(IDMap(ids: ["a", "b", "a"], values: [1, 2, 3]) == nil)
        // The same bytes: "é" precomposed twice; decomposed "é" is another id.
        #expect(IDMap(ids: ["\u{e9}", "x", "\u{e9}"], values: [1, 2, 3]) == nil)
        #expect(IDMap(ids: ["\u{e9}", "e\u{301}"], values: [1, 2])?.count == 2)
    }

    @Test func anInPlaceChangeThatRemovesTheEntryMovesTheLastOneIn() {
        var map: IDMap<[Int]> = ["a": [1], "b": [2], "c": [3]]
        // `_modify` yielding nil removes the entry, wherever it lies.
        func drop(_ value: inout [Int]?) { value = nil }
        drop(&map["a"])
        #expect(map.count == 2 && map["a"] == nil && map["b"] == [2] && map["c"] == [3])
        map["b"]?.append(4)
        drop(&map["c"])
        #expect(map.count == 1 && map["b"] == [2, 4])
        drop(&map["b"])
        #expect(map.isEmpty && map["b"] == nil)
        map["d"] = [5]
        #expect(map["d"] == [5] && map.count == 1)
    }

    /// A commit of one record reserves room for one more before inserting it: the table
    /// must still grow geometrically (a few reallocations), not by one entry each time
    /// (which copies every entry on every commit).
    @Test func reservingOneMoreBeforeEachInsertGrowsGeometrically() {
        var map = IDMap<Int>()
        var capacities: Set<Int> = []
        for number in 0..<5_000 {
            map.reserveCapacity(map.count + 1)
            map[Self.id(number)] = number
            capacities.insert(map.capacity)
        }
        #expect(map.count == 5_000)
        #expect(capacities.count <= 16, "\(capacities.count) reallocations for 5,000 inserts")
        #expect((0..<5_000).allSatisfy { map[Self.id($0)] == $0 })
    }

    @Test func idsAreComparedByTheirBytes() {
        var map = IDMap<Int>()
        map["e\u{301}"] = 1
        map["\u{e9}"] = 2
        #expect(map.count == 2)
        #expect(map["e\u{301}"] == 1 && map["\u{e9}"] == 2)
    }

    @Test func equalityIgnoresOrderFilterAndRemoveAllKeepTheRest() {
        var first = IDMap<Int>()
        var second = IDMap<Int>()
        for number in 0..<1_000 { first[Self.id(number)] = number }
        for number in (0..<1_000).reversed() { second[Self.id(number)] = number }
        #expect(first == second)
        second[Self.id(5)] = -1
        #expect(first != second)
        let even = first.filter { $0 % 2 == 0 }
        #expect(even.count == 500 && even[Self.id(4)] == 4 && even[Self.id(5)] == nil)
        first.removeAll(keepingCapacity: true)
        #expect(first.isEmpty && first[Self.id(4)] == nil)
        first[Self.id(4)] = 4
        #expect(first.count == 1 && first[Self.id(4)] == 4)
        var reserved = IDMap<Int>(minimumCapacity: 10_000)
        for number in 0..<10_000 { reserved[Self.id(number)] = number }
        #expect((0..<10_000).allSatisfy { reserved[Self.id($0)] == $0 })
    }
}
