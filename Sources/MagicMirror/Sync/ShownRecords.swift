/// The records a mirror shows (its `dataModel`), and the bookkeeping that turns a mutation of
/// the array into the list of records it changed.
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
    ///
    /// It is the only copy of the records: an in-place edit is compared with the
    /// before-images its log captured (see ``RecordArray/EditLog``), not with a second copy.
    private var storage = RecordArray<Record>()
    /// While the array is lent out for an in-place edit: what it leaves behind, for an edit
    /// that replaces it as a whole.
    private var lentCopy: LentArrayCopy<Record>?
    /// Counts in-place edits, to tell their logs apart.
    private var editCount: UInt64 = 0

    init() {
        storage.startTracking()
    }

    /// Whether the array is lent out for an in-place edit.
    var isLent: Bool { lentCopy != nil }

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
    ///   already (the index then keeps these strings rather than forming new ones).
    mutating func load(_ records: [Record], ids: [String]? = nil) {
        precondition(ids.map { $0.count == records.count } ?? true, "one id per record")
        storage = RecordArray(records)
        storage.startTracking(ids: ids)
        if storage.mayHaveDuplicates { removeDuplicates(valueBefore: { _ in nil }) }
    }

    /// Shows `records` (already in order), replacing everything, when their ids are the
    /// keys of `table` in the same order: the index shares the table's ids and the table that
    /// finds them, rather than hashing every id again (a database's table of records, when a
    /// mirror opens).
    mutating func load<Value>(_ records: [Record], indexOf table: IDMap<Value>) {
        storage = RecordArray(records)
        storage.startTracking(indexOf: table)
    }

    /// The record shown with `id`, if any. Constant time (it may repair the array's index).
    subscript(id: String) -> Record? {
        mutating get {
            precondition(!isLent, Self.overlappingAccess)
            return storage.record(withID: id)
        }
    }

    // MARK: Local edits

    /// Starts an in-place edit: the array logs the ids the edit touches, with their
    /// before-images. Returns the edit's number, for ``endEdit(_:returning:)``.
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
        let copy = LentArrayCopy<Record>()
        lentCopy = copy
        var lent = storage
        storage = RecordArray()
        lent.lend(to: copy)
        return lent
    }

    /// Ends the edit numbered `number`, taking back the lent array, and returns the records
    /// whose value it changed: each touched id's before-image compared with its record now.
    /// Takes time in proportion to the records the edit touched, or linear time when the
    /// edit put another array in the place of the lent one.
    mutating func endEdit(_ number: UInt64, returning edited: consuming RecordArray<Record>) -> [Change] {
        guard let copy = lentCopy else { preconditionFailure("endEdit without lendArray") }
        lentCopy = nil
        storage = edited
        if storage.endLend(from: copy), let log = storage.endLog(session: number) {
            // Drops the copy left behind first: the records are then held only here.
            copy.close()
            return changes(loggedIn: log)
        }
        guard let kept = copy.close() else { preconditionFailure("a lent array leaves a copy") }
        return changes(replacing: kept)
    }

    /// The changes of an in-place edit whose log the array returned.
    private mutating func changes(loggedIn log: RecordArray<Record>.EditLog) -> [Change] {
        if log.sawDuplicate || storage.mayHaveDuplicates {
            // Each touched id once: the log notes an id the first time only.
            let before = IDMap(ids: log.touched, values: log.before) ?? [:]
            removeDuplicates { id in before[id] ?? nil }
        }
        var changes: [Change] = []
        // Indices, not `zip`: in unspecialized generic code, `zip` costs more than the rest
        // of a one-record edit's comparison.
        for index in log.touched.indices {
            let id = log.touched[index]
            let new = storage.record(withID: id)
            if log.before[index] != new { changes.append(Change(id: id, old: log.before[index], new: new)) }
        }
        return changes
    }

    /// The changes of an edit that put another array in the place of the lent one: the new
    /// array compared with the records before the edit, which are those the lent array left
    /// behind, the ones its log touched taken back to their before-images. Linear time.
    private mutating func changes(replacing kept: LentArrayCopy<Record>.Kept) -> [Change] {
        let touched = IDSet(kept.touched)
        var records = kept.elements.filter { !touched.contains($0.recordID) }
        records.append(contentsOf: kept.before.compactMap { $0 })
        var before = RecordArray(records)
        before.startTracking()
        return replaceAll(with: storage, replacing: &before)
    }

    /// Replaces the whole array and returns the records whose value changed. Linear time.
    mutating func replaceAll(with newValue: RecordArray<Record>) -> [Change] {
        precondition(!isLent, Self.overlappingAccess)
        var before = storage
        return replaceAll(with: newValue, replacing: &before)
    }

    /// Shows `newValue` in place of `before` (a tracked array without duplicates) and
    /// returns the records whose value changed.
    private mutating func replaceAll(with newValue: RecordArray<Record>, replacing before: inout RecordArray<Record>) -> [Change] {
        var replacement = RecordArray(newValue.array)
        replacement.startTracking()
        storage = replacement
        if storage.mayHaveDuplicates { removeDuplicates { id in before.record(withID: id) } }
        var changes: [Change] = []
        var listed = IDSet()
        listed.reserveCapacity(storage.count)
        for record in storage.array {
            let id = record.recordID
            listed.insert(id)
            let old = before.record(withID: id)
            if old != record { changes.append(Change(id: id, old: old, new: record)) }
        }
        for record in before.array where !listed.contains(record.recordID) {
            changes.append(Change(id: record.recordID, old: record, new: nil))
        }
        return changes
    }

    /// Leaves one record of each id that appears more than once: the newest value, in the
    /// place of the record the array held before (see "One record per id" in `dataModel`).
    ///
    /// The newest value is the last copy that differs from `valueBefore(id)` (the value
    /// before the edit), or the last copy when the id is new. Its place is that of the copy
    /// equal to `valueBefore(id)`, or of the first copy. An id held twice is always one the
    /// edit touched, so `valueBefore` need only know those.
    private mutating func removeDuplicates(valueBefore: (String) -> Record?) {
        var place: IDMap<Int> = [:]
        var newest: IDMap<Int> = [:]
        var duplicated = IDSet()
        for (index, record) in storage.enumerated() {
            let id = record.recordID
            let known = valueBefore(id)
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
        let position = storage.position(of: id)
        let old = position.map { storage[$0] }
        guard old != value else { return nil }
        switch (position, value) {
        case (let position?, let value?): storage[position] = value
        case (nil, let value?): storage.insert(value, at: place(of: id, orderedBy: order))
        case (let position?, nil): storage.remove(at: position)
        case (nil, nil): break
        }
        return Change(id: id, old: old, new: value)
    }

    /// Takes back the record with `id` that a local edit just added, without a change: the
    /// engine refused the edit (see ``SyncEngine/isSkipped(_:)``).
    mutating func withdraw(_ id: String) {
        precondition(!isLent, Self.overlappingAccess)
        if let position = storage.position(of: id) { storage.remove(at: position) }
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
