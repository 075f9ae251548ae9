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

    /// Indexes records whose ids are the keys of `table`, in the order of its keys: the
    /// index shares the table's ids and the table that finds them (copied when either side
    /// adds or removes an id). Linear time, but no id is hashed.
    init<Value>(indexing table: IDMap<Value>) {
        validBelow = table.count
        positions = IDMap(sameKeysAs: table, values: Array(0..<table.count))
        hasDuplicates = false
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

    /// Notes that the current mutation touched `id`; whether it is the first time since the
    /// log began (the array then records the id's value before the mutation).
    @discardableResult
    mutating func noteTouched(_ id: String) -> Bool {
        guard log != nil, log!.touchedSet.insert(id).inserted else { return false }
        log!.touched.append(id)
        return true
    }

    /// The position of the record with `id`, an id the log has not touched yet: the array
    /// then holds at most one record with it, unchanged since the log began. Constant time
    /// unless the index is stale there (then it is repaired from ``validBelow``).
    ///
    /// Duplicates of other ids do not matter: they are touched ids, and the index entries of
    /// untouched ids stay right through them (see ``moved(_:to:)``).
    ///
    /// - Parameter skipping: A position whose record does not count (one whose id was just
    ///   changed in place to `id`).
    mutating func positionOfUntouched<Record: Recordable>(
        _ id: String, in elements: [Record], skipping: Int? = nil
    ) -> Int? {
        func holds(_ position: Int) -> Bool {
            position != skipping && position < elements.count && IDKey.same(elements[position].recordID, id)
        }
        // An untouched id never left the index: no entry means no record.
        guard let position = positions[id] else { return nil }
        if holds(position) { return position }
        for index in Swift.min(validBelow, elements.count)..<elements.count where index != skipping {
            positions[elements[index].recordID] = index
        }
        validBelow = elements.count
        if let repaired = positions[id], holds(repaired) { return repaired }
        return elements.indices.first(where: holds)
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

    /// Records that `id`, already in the array, moved to `position` (a swap). Kept even when
    /// ``hasDuplicates``, so that the entries of untouched ids stay right for
    /// ``positionOfUntouched(_:in:skipping:)``.
    mutating func moved(_ id: String, to position: Int) {
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
