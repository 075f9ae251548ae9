import Testing

@testable import MagicMirror

@Suite(.timeLimit(.minutes(5))) struct OldestSequencesTests {
    @Test func theOldestCurrentItemIsFoundAndGoneOnesAreDropped() {
        var sequences = OldestSequences()
        for (sequence, id) in [(5, "e"), (2, "b"), (9, "i"), (1, "a"), (7, "g"), (3, "c")] {
            sequences.insert(sequence, id: id)
        }
        var gone: Set<String> = []
        #expect(sequences.oldest { _, id in !gone.contains(id) } == 1)
        gone = ["a", "b", "e"]
        #expect(sequences.oldest { _, id in !gone.contains(id) } == 3)
        #expect(sequences.count == 4)  // a and b dropped; e waits below the top
        gone = ["a", "b", "c", "e", "g", "i"]
        #expect(sequences.oldest { _, id in !gone.contains(id) } == nil)
        #expect(sequences.count == 0)
    }

    @Test func manyItemsComeOutInOrder() {
        var sequences = OldestSequences()
        let order = (0..<500).map { ($0 * 7_919) % 500 }
        for sequence in order { sequences.insert(sequence, id: "r\(sequence)") }
        var taken: Set<Int> = []
        var seen: [Int] = []
        while let oldest = sequences.oldest(where: { sequence, _ in !taken.contains(sequence) }) {
            seen.append(oldest)
            taken.insert(oldest)
        }
        #expect(seen == Array(0..<500))
    }
}
