/// The records a mirror shows (its `dataModel`), each one's value by id, and the bookkeeping
/// that turns a mutation of the array into the list of records it changed.
///
/// A value type with no locks and no clock: ``SyncEngine`` holds one and decides what each
/// change means (a pending commit, a delivered ``MirrorChange``).
struct ShownRecords<Record: Recordable>: Sendable {
    /// One record whose value changed: from `old` to `new` (`nil`: no record).
    struct Change {
        let id: String
        let old: Record?
        let new: Record?

        var kind: MirrorChange<Record>.Kind { old == nil ? .inserted : (new == nil ? .removed : .updated) }
    }

    /// What `dataModel` returns; empty while lent out for an edit (see ``lendArray()``).
    private var storage = RecordArray<Record>()
    /// Whether the array is lent out for an in-place edit.
    private(set) var isLent = false
    /// The value of every record in ``array``, by id: what an edit is compared with.
    private(set) var valuesByID: IDMap<Record> = [:]
    /// Counts in-place edits, to tell their logs apart.
    private var editCount: UInt64 = 0

    init() {
        storage.startTracking()
    }

    /// What `dataModel` returns.
    ///
    /// - Precondition: The array is not lent out: it is not read from inside an edit.
    var array: RecordArray<Record> {
        precondition(!isLent, Self.overlappingAccess)
        return storage
    }

    /// Why a program stopped: it read or changed a mirror's records from inside a mutation
    /// of them.
    static var overlappingAccess: String {
        "Mirror<\(Record.self)>.dataModel was read or changed from inside a mutation of it (for example in a "
            + "removeAll(where:) predicate): an overlapping access. Read what you need before the mutation"
    }

    /// Shows `records` (already in order), replacing everything.
    ///
    /// - Parameter ids: The records' ids, in the same order, when the caller has them
    ///   already (the tables then keep these strings rather than forming new ones).
    mutating func load(_ records: [Record], ids: [String]? = nil) {
        precondition(ids.map { $0.count == records.count } ?? true, "one id per record")
        storage = RecordArray(records)
        storage.startTracking(ids: ids)
        if storage.mayHaveDuplicates { removeDuplicates(keeping: [:]) }
        if let positions = storage.idsInOrder {
            // The same ids and table as the array's positions. The values are copied:
            // sharing the array's storage would make the first edit of the array copy it.
            var values: [Record] = []
            values.reserveCapacity(storage.count)
            values.append(contentsOf: storage.array)
            valuesByID = positions.withValues(values)
            return
        }
        valuesByID = [:]
        valuesByID.reserveCapacity(storage.count)
        for record in storage { valuesByID[record.recordID] = record }
    }

    /// The value shown for `id`, if any.
    subscript(id: String) -> Record? { valuesByID[id] }

    // MARK: Local edits

    /// Starts an in-place edit: the array logs the ids the edit touches. Returns the edit's
    /// number, for ``endEdit(_:)``.
    mutating func beginEdit() -> UInt64 {
        precondition(!isLent, Self.overlappingAccess)
        editCount &+= 1
        storage.beginLog(session: editCount)
        return editCount
    }

    /// Lends the array for an in-place edit begun with ``beginEdit()``: the array moves out
    /// (the engine's copy is left empty, so the edit does not copy the records) and comes
    /// back with ``endEdit(_:returning:)``.
    mutating func lendArray() -> RecordArray<Record> {
        precondition(!isLent, Self.overlappingAccess)
        isLent = true
        let lent = storage
        storage = RecordArray()
        return lent
    }

    /// Ends the edit numbered `number`, taking back the lent array, and returns the records
    /// whose value it changed.
    mutating func endEdit(_ number: UInt64, returning edited: consuming RecordArray<Record>) -> [Change] {
        storage = edited
        isLent = false
        return endEdit(number)
    }

    /// Ends the edit numbered `number` and returns the records whose value it changed.
    mutating func endEdit(_ number: UInt64) -> [Change] {
        guard storage.isTracked, let log = storage.endLog(session: number) else {
            // The array was replaced as a whole: compare everything.
            return replaceAll(with: storage)
        }
        if log.sawDuplicate || storage.mayHaveDuplicates { removeDuplicates(keeping: valuesByID) }
        var changes: [Change] = []
        for id in log.touched {
            let current = storage.record(withID: id)
            if let change = note(id, current) { changes.append(change) }
        }
        return changes
    }

    /// Replaces the whole array and returns the records whose value changed. Linear time.
    mutating func replaceAll(with newValue: RecordArray<Record>) -> [Change] {
        precondition(!isLent, Self.overlappingAccess)
        var replacement = RecordArray(newValue.array)
        replacement.startTracking()
        storage = replacement
        if storage.mayHaveDuplicates { removeDuplicates(keeping: valuesByID) }
        var changes: [Change] = []
        var listed = IDSet()
        listed.reserveCapacity(storage.count)
        for record in storage.array {
            let id = record.recordID
            listed.insert(id)
            if let change = note(id, record) { changes.append(change) }
        }
        let gone = valuesByID.keys.filter { !listed.contains($0) }
        for id in gone {
            if let change = note(id, nil) { changes.append(change) }
        }
        return changes
    }

    /// Records that `id` now has `value` in the array; the change, or `nil` when equal.
    private mutating func note(_ id: String, _ value: Record?) -> Change? {
        let old = valuesByID[id]
        guard old != value else { return nil }
        valuesByID[id] = value
        return Change(id: id, old: old, new: value)
    }

    /// Leaves one record of each id that appears more than once: the newest value, in the
    /// place of the record the array held before (see "One record per id" in `dataModel`).
    ///
    /// The newest value is the last copy that differs from `keeping[id]` (the value before
    /// the edit), or the last copy when the id is new. Its place is that of the copy equal
    /// to `keeping[id]`, or of the first copy.
    private mutating func removeDuplicates(keeping: IDMap<Record>) {
        var place: IDMap<Int> = [:]
        var newest: IDMap<Int> = [:]
        var duplicated = IDSet()
        for (index, record) in storage.enumerated() {
            let id = record.recordID
            let known = keeping[id]
            if let first = place[id] {
                duplicated.insert(id)
                if let known, record == known, storage[first] != known { place[id] = index }
            } else {
                place[id] = index
            }
            if known.map({ record != $0 }) ?? true { newest[id] = index }
        }
        guard !duplicated.isEmpty else {
            storage.rebuildPositions()
            return
        }
        var kept: [Record] = []
        kept.reserveCapacity(storage.count)
        for (index, record) in storage.enumerated() {
            let id = record.recordID
            guard duplicated.contains(id) else {
                kept.append(record)
                continue
            }
            if place[id] == index { kept.append(storage[newest[id] ?? index]) }
        }
        storage = RecordArray(kept)
        storage.startTracking()
    }

    // MARK: Changes from elsewhere

    /// Shows `value` for `id` (`nil`: removes it): replaced in its place, or inserted at its
    /// place in `order`, found by binary search (the end, at once, when it is the newest).
    ///
    /// - Returns: The change, or `nil` when the array already showed `value`.
    mutating func set(_ id: String, _ value: Record?, orderedBy order: (String) -> CreationOrder) -> Change? {
        precondition(!isLent, Self.overlappingAccess)
        guard let change = note(id, value) else { return nil }
        if let value {
            if let position = storage.position(of: id) {
                storage[position] = value
            } else {
                storage.insert(value, at: place(of: id, orderedBy: order))
            }
        } else if let position = storage.position(of: id) {
            storage.remove(at: position)
        }
        return change
    }

    /// The position at which a record new to ``array`` goes in `order`.
    private func place(of id: String, orderedBy order: (String) -> CreationOrder) -> Int {
        let key = order(id)
        guard let last = storage.last, key < order(last.recordID) else { return storage.count }
        var low = 0
        var high = storage.count - 1
        while low < high {
            let middle = (low + high) / 2
            if order(storage[middle].recordID) < key { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
