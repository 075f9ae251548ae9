/// A sorted sequence with positions: insertion, removal and access by position in
/// O(log n) comparisons plus a bounded shift, whatever the number of elements.
///
/// Elements live in chunks of at most ``chunkCapacity``, in order; a binary search over the
/// chunks' last elements and then within one chunk finds a place, and a Fenwick tree over
/// the chunks' sizes turns a (chunk, offset) into a position and back in O(log n). A chunk
/// that fills up splits in two and an empty one goes away; either rebuilds the tree, which
/// costs O(n / chunkCapacity) once every chunkCapacity / 2 changes at most.
///
/// `areInIncreasingOrder` must be a strict total order: no two elements compare equal.
package struct OrderedIndex<Element>: Sendable where Element: Sendable {
    package static var chunkCapacity: Int { 256 }

    private var chunks: [[Element]] = []
    /// Fenwick tree over `chunks[i].count` (1-based, as usual).
    private var tree: [Int] = [0]
    package private(set) var count = 0
    package let areInIncreasingOrder: @Sendable (Element, Element) -> Bool

    package init(areInIncreasingOrder: @escaping @Sendable (Element, Element) -> Bool) {
        self.areInIncreasingOrder = areInIncreasingOrder
    }

    /// Fills an empty index from `elements`, sorting them first. O(n log n).
    package mutating func load(_ elements: [Element]) {
        load(sorted: elements.sorted(by: areInIncreasingOrder))
    }

    /// Fills an empty index from `sorted`, already in order. O(n), no comparisons.
    package mutating func load(sorted: [Element]) {
        let half = Self.chunkCapacity / 2
        chunks = stride(from: 0, to: sorted.count, by: half).map { Array(sorted[$0..<min($0 + half, sorted.count)]) }
        count = sorted.count
        rebuildTree()
    }

    /// Inserts `element` and returns its position.
    @discardableResult
    package mutating func insert(_ element: Element) -> Int {
        count += 1
        guard !chunks.isEmpty else {
            chunks = [[element]]
            rebuildTree()
            return 0
        }
        var chunk = firstChunk { !areInIncreasingOrder($0, element) }
        if chunk == chunks.count { chunk -= 1 }
        let offset = chunks[chunk].partitionPoint { areInIncreasingOrder($0, element) }
        insert(element, chunk: chunk, offset: offset)
        return start(of: chunk) + offset
    }

    /// Inserts `element` at `position` (at most ``count``), without comparing: the caller
    /// knows the place (a copy of an index replaying another's changes). O(log n) plus a
    /// bounded shift.
    package mutating func insert(_ element: Element, at position: Int) {
        precondition(position >= 0 && position <= count, "position \(position) out of range 0...\(count)")
        count += 1
        guard !chunks.isEmpty else {
            chunks = [[element]]
            rebuildTree()
            return
        }
        let (chunk, offset) = position == count - 1
            ? (chunks.count - 1, chunks[chunks.count - 1].count)
            : place(of: position)
        insert(element, chunk: chunk, offset: offset)
    }

    /// Removes and returns the element at `position`, without comparing. O(log n) plus a
    /// bounded shift.
    @discardableResult
    package mutating func remove(at position: Int) -> Element {
        precondition(position >= 0 && position < count, "position \(position) out of range 0..<\(count)")
        let (chunk, offset) = place(of: position)
        let element = chunks[chunk][offset]
        remove(chunk: chunk, offset: offset)
        return element
    }

    /// Puts `element` at `offset` of `chunk` (``count`` already counts it), splitting a
    /// chunk that overflows.
    private mutating func insert(_ element: Element, chunk: Int, offset: Int) {
        chunks[chunk].insert(element, at: offset)
        if chunks[chunk].count > Self.chunkCapacity {
            let upper = Array(chunks[chunk][(Self.chunkCapacity / 2)...])
            chunks[chunk].removeLast(upper.count)
            chunks.insert(upper, at: chunk + 1)
            rebuildTree()
        } else {
            add(1, toChunk: chunk)
        }
    }

    /// Removes the element equal (in the order) to `element`; returns its position, or
    /// `nil` when there is none.
    @discardableResult
    package mutating func remove(_ element: Element) -> Int? {
        guard let (chunk, offset) = locate(element) else { return nil }
        let position = start(of: chunk) + offset
        remove(chunk: chunk, offset: offset)
        return position
    }

    /// Takes out the element at `offset` of `chunk`, dropping a chunk left empty.
    private mutating func remove(chunk: Int, offset: Int) {
        chunks[chunk].remove(at: offset)
        count -= 1
        if chunks[chunk].isEmpty {
            chunks.remove(at: chunk)
            rebuildTree()
        } else {
            add(-1, toChunk: chunk)
        }
    }

    /// The position of the element equal (in the order) to `element`, or `nil`.
    package func position(of element: Element) -> Int? {
        locate(element).map { start(of: $0.chunk) + $0.offset }
    }

    /// The element at `position`, which must be below ``count``.
    package subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "position \(position) out of range 0..<\(count)")
        let (chunk, offset) = place(of: position)
        return chunks[chunk][offset]
    }

    /// The chunk holding `position` (below ``count``) and its offset there.
    private func place(of position: Int) -> (chunk: Int, offset: Int) {
        // Descend the Fenwick tree to the chunk holding `position`.
        var chunk = 0
        var remaining = position
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            let next = chunk + step
            if next < tree.count, tree[next] <= remaining {
                chunk = next
                remaining -= tree[next]
            }
            step /= 2
        }
        return (chunk, remaining)
    }

    /// The first `limit` elements (all of them when `limit` is `nil`), in order.
    package func prefix(_ limit: Int?) -> [Element] {
        var result: [Element] = []
        let wanted = min(limit ?? count, count)
        result.reserveCapacity(wanted)
        for chunk in chunks {
            if result.count + chunk.count <= wanted {
                result.append(contentsOf: chunk)
            } else {
                result.append(contentsOf: chunk[..<(wanted - result.count)])
            }
            if result.count == wanted { break }
        }
        return result
    }

    // MARK: Internals

    private func locate(_ element: Element) -> (chunk: Int, offset: Int)? {
        let chunk = firstChunk { !areInIncreasingOrder($0, element) }
        guard chunk < chunks.count else { return nil }
        let offset = chunks[chunk].partitionPoint { areInIncreasingOrder($0, element) }
        guard offset < chunks[chunk].count, !areInIncreasingOrder(element, chunks[chunk][offset]) else { return nil }
        return (chunk, offset)
    }

    /// The first chunk whose last element satisfies `predicate` (monotonic), or
    /// `chunks.count`.
    private func firstChunk(where predicate: (Element) -> Bool) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if predicate(chunks[middle][chunks[middle].count - 1]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// The number of elements in the chunks before `chunk`.
    private func start(of chunk: Int) -> Int {
        var sum = 0
        var index = chunk
        while index > 0 {
            sum += tree[index]
            index -= index & -index
        }
        return sum
    }

    private mutating func add(_ delta: Int, toChunk chunk: Int) {
        var index = chunk + 1
        while index < tree.count {
            tree[index] += delta
            index += index & -index
        }
    }

    private mutating func rebuildTree() {
        tree = [Int](repeating: 0, count: chunks.count + 1)
        for (chunk, elements) in chunks.enumerated() {
            var index = chunk + 1
            tree[index] += elements.count
            let parent = index + (index & -index)
            if parent < tree.count { tree[parent] += tree[index] }
            index = parent
        }
    }
}

extension Array {
    /// The index of the first element that does not satisfy `belongsBefore` (which must
    /// hold for a prefix of the array), found by binary search.
    fileprivate func partitionPoint(_ belongsBefore: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongsBefore(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
