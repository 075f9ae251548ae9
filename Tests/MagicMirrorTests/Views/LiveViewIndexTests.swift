import MagicMirror
import MirrorTestSupport
import Testing

/// The ordered index behind live views (Views/OrderedIndex.swift): positions, access by
/// position and prefixes stay those of a sorted array through inserts and removals that
/// split and drop chunks.
@Suite(.timeLimit(.minutes(5))) struct LiveViewIndexTests {
    @Test func randomInsertsAndRemovalsMatchASortedArray() {
        var random = SplitMix64(seed: 3)
        var index = OrderedIndex<Int>(areInIncreasingOrder: <)
        var model: [Int] = []
        for step in 0..<10_000 {
            // Grow to a few thousand (many chunk splits), then shrink (chunks go away).
            let growing = step < 6_000
            if model.isEmpty || (growing ? random.next() % 4 != 0 : random.next() % 4 == 0) {
                var value = Int(random.next() % 1_000_000)
                while model.contains(value) { value += 1 }
                let position = index.insert(value)
                let expected = model.firstIndex { $0 > value } ?? model.count
                model.insert(value, at: expected)
                #expect(position == expected)
            } else {
                let victim = model[Int(random.next() % UInt64(model.count))]
                let position = index.remove(victim)
                #expect(position == model.firstIndex(of: victim))
                model.removeAll { $0 == victim }
                #expect(index.remove(victim) == nil)
            }
            #expect(index.count == model.count)
            if step % 997 == 0, !model.isEmpty {
                #expect(index.prefix(nil) == model)
                #expect(index.prefix(50) == Array(model.prefix(50)))
                for probe in [0, model.count / 2, model.count - 1] {
                    #expect(index[probe] == model[probe])
                    #expect(index.position(of: model[probe]) == probe)
                }
            }
        }
        for victim in model.shuffled(using: &random) {
            #expect(index.remove(victim) == model.firstIndex(of: victim))
            model.removeAll { $0 == victim }
        }
        #expect(index.count == 0)
        #expect(index.prefix(nil).isEmpty)
    }

    /// A view's readers see a second index that replays the first one's positions without
    /// comparing (Views/LiveView.swift): it must stay equal to it through splits and drops.
    @Test func positionalInsertsAndRemovalsReplayTheSortedOnes() {
        var random = SplitMix64(seed: 5)
        var sorted = OrderedIndex<Int>(areInIncreasingOrder: <)
        var replica = OrderedIndex<Int>(areInIncreasingOrder: { _, _ in Issue.record("compared"); return false })
        var model: [Int] = []
        for step in 0..<8_000 {
            let growing = step < 5_000
            if model.isEmpty || (growing ? random.next() % 4 != 0 : random.next() % 4 == 0) {
                var value = Int(random.next() % 1_000_000)
                while model.contains(value) { value += 1 }
                replica.insert(value, at: sorted.insert(value))
                model.insert(value, at: model.firstIndex { $0 > value } ?? model.count)
            } else {
                let victim = model[Int(random.next() % UInt64(model.count))]
                let position = sorted.remove(victim)
                #expect(position != nil)
                #expect(replica.remove(at: position ?? 0) == victim)
                model.removeAll { $0 == victim }
            }
            #expect(replica.count == model.count)
            if step % 499 == 0 { #expect(replica.prefix(nil) == model) }
        }
        var loaded = OrderedIndex<Int>(areInIncreasingOrder: { _, _ in Issue.record("compared"); return false })
        loaded.load(sorted: model)
        #expect(loaded.prefix(nil) == model)
        #expect(replica.prefix(nil) == model)
    }

    @Test func loadingSortsAndSplitsIntoChunks() {
        var index = OrderedIndex<Int>(areInIncreasingOrder: >)
        let values = Array(0..<1_000).shuffled()
        index.load(values)
        #expect(index.prefix(nil) == Array((0..<1_000).reversed()))
        #expect(index[999] == 0)
        #expect(index.insert(500_000) == 0)
        #expect(index.position(of: 1_234) == nil)
    }
}
