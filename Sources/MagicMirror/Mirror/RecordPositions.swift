/// The id → position index of a mirror's ``RecordArray``, and the log of the ids the
/// current mutation touched.
///
/// It knows the records only by their ids: the array passes its elements to the lookups.
/// Positions are kept lazily: an insertion or removal in the middle only lowers
/// ``validBelow``, and a lookup that meets a stale position repairs the index from there.
struct RecordPositions: Sendable {
    /// The ids one mutation touched, in the order it touched them.
    struct ChangeLog: Sendable, Equatable {
        let session: UInt64
        var touched: [String] = []
        var touchedSet = IDSet()
        var sawDuplicate = false
    }

    /// Holds exactly the ids in the array (unless ``hasDuplicates``). A position below
    /// ``validBelow`` is exact; a position at or above it may be stale after an insertion
    /// or removal in the middle, and is checked before it is used.
    private(set) var positions: IDMap<Int> = [:]
    private(set) var validBelow = 0
    /// Set when an id was added while already present; lookups then fall back to scans
    /// until the positions are rebuilt.
    private(set) var hasDuplicates = false
    /// The ids touched since the array's `beginLog(session:)`; `nil` when no mutation is
    /// logged.
    var log: ChangeLog?

    /// Indexes `elements`. Linear time.
    init<Record: Recordable>(indexing elements: [Record]) {
        rebuild(indexing: elements)
    }

    /// Indexes records whose ids are `ids`, in order. Linear time.
    init(indexing ids: [String]) {
        rebuild(indexing: ids)
    }

    /// Indexes `elements` from scratch. Linear time.
    mutating func rebuild<Record: Recordable>(indexing elements: [Record]) {
        rebuild(indexing: elements.map(\.recordID))
    }

    /// Indexes records whose ids are `ids`, in order, from scratch. Linear time.
    mutating func rebuild(indexing ids: [String]) {
        validBelow = ids.count
        if let positions = IDMap(ids: ids, values: Array(ids.indices)) {
            self.positions = positions
            hasDuplicates = false
            return
        }
        var positions = IDMap<Int>()
        positions.reserveCapacity(ids.count)
        var duplicates = false
        for (index, id) in ids.enumerated() {
            if positions.updateValue(index, forKey: id) != nil { duplicates = true }
        }
        self.positions = positions
        hasDuplicates = duplicates
    }

    /// The position of `recordID` in `elements`, without repairing the index: constant time
    /// unless the position found is stale (then a scan).
    func lookUp<Record: Recordable>(_ recordID: String, in elements: [Record]) -> Int? {
        if !hasDuplicates {
            guard let position = positions[recordID] else { return nil }
            if position < elements.count, IDKey.same(elements[position].recordID, recordID) { return position }
        }
        return elements.firstIndex { IDKey.same($0.recordID, recordID) }
    }

    /// The position of `recordID` in `elements`; repairs stale index entries.
    mutating func position<Record: Recordable>(of recordID: String, in elements: [Record]) -> Int? {
        if hasDuplicates { return elements.firstIndex { IDKey.same($0.recordID, recordID) } }
        guard let position = positions[recordID] else { return nil }
        if position < elements.count, IDKey.same(elements[position].recordID, recordID) { return position }
        for index in validBelow..<elements.count {
            positions[elements[index].recordID] = index
        }
        validBelow = elements.count
        if let repaired = positions[recordID], repaired < elements.count,
           IDKey.same(elements[repaired].recordID, recordID) {
            return repaired
        }
        return elements.firstIndex { IDKey.same($0.recordID, recordID) }
    }

    /// Notes that the current mutation touched `id`.
    mutating func noteTouched(_ id: String) {
        guard log != nil else { return }
        if log!.touchedSet.insert(id).inserted {
            log!.touched.append(id)
        }
    }

    /// Records that `id` is now at `position`.
    mutating func register(_ id: String, at position: Int) {
        if positions[id] != nil {
            hasDuplicates = true
            log?.sawDuplicate = true
        } else {
            positions[id] = position
        }
    }

    /// Records that `id`, already in the array, moved to `position` (a swap).
    mutating func moved(_ id: String, to position: Int) {
        guard !hasDuplicates else { return }
        positions[id] = position
    }

    /// Forgets `id`, which left the array.
    mutating func unregister(_ id: String) {
        guard !hasDuplicates else { return }
        positions[id] = nil
    }

    /// The records from `position` on moved.
    mutating func shifted(from position: Int) {
        validBelow = Swift.min(validBelow, position)
    }

    /// Forgets every id.
    mutating func removeAll(keepingCapacity keepCapacity: Bool) {
        positions.removeAll(keepingCapacity: keepCapacity)
        validBelow = 0
        hasDuplicates = false
    }

    /// Makes room for `minimumCapacity` ids.
    mutating func reserveCapacity(_ minimumCapacity: Int) {
        positions.reserveCapacity(minimumCapacity)
    }
}
