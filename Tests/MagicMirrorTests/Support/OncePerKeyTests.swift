@testable import MagicMirror
import Testing

/// "Report once per key", written once: the first sight of a key is new, later ones are
/// not, and the set forgets its oldest keys instead of growing without end.
@Suite(.timeLimit(.minutes(5))) struct OncePerKeyTests {
    @Test func aKeyIsNewOnlyTheFirstTime() {
        var keys = OncePerKey<String>()
        let isNew = ["a", "a", "b", "a"].map { keys.insert($0) }
        #expect(isNew == [true, false, true, false])
        #expect(keys.contains("a"))
        #expect(!keys.contains("c"))
        #expect(keys.count == 2)
    }

    @Test func theOldestKeyIsForgottenBeyondTheCapacity() {
        var keys = OncePerKey<Int>(capacity: 3)
        let first = [1, 2, 3, 4].map { keys.insert($0) }
        #expect(first == [true, true, true, true])
        #expect(keys.count == 3)
        #expect(!keys.contains(1), "the oldest was forgotten")
        #expect(keys.contains(2) && keys.contains(3) && keys.contains(4))
        // A forgotten key counts as new again (and pushes out the next oldest); a
        // remembered one is still not new.
        let again = [1, 4].map { keys.insert($0) }
        #expect(again == [true, false])
        #expect(!keys.contains(2))
    }

    @Test func manyKeysKeepTheSetBounded() {
        var keys = OncePerKey<Int>(capacity: 100)
        for key in 0..<10_000 { _ = keys.insert(key) }
        #expect(keys.count == 100)
        #expect(keys.contains(9_999))
        #expect(keys.contains(9_900))
        #expect(!keys.contains(9_899))
    }

    @Test func theCapacityIsAtLeastOne() {
        var keys = OncePerKey<String>(capacity: 0)
        #expect(keys.capacity == 1)
        let isNew = ["a", "a", "b", "a"].map { keys.insert($0) }
        #expect(isNew == [true, false, true, true])
    }
}
