/// The array of records a ``Mirror`` holds: it reads and mutates like `Array`, and tells the
/// mirror which records each mutation touched.
///
/// `Mirror.dataModel` is a `RecordArray`. Use it as you would use an array:
///
/// ```swift
/// mirror.dataModel.append(Todo(title: "Milk"))
/// mirror.dataModel[0].done = true
/// mirror.dataModel.remove(at: 1)
/// for todo in mirror.dataModel where !todo.done { print(todo.title) }
/// let plain: [Todo] = mirror.dataModel.array
/// ```
///
/// It is a `RandomAccessCollection`, `MutableCollection` and `RangeReplaceableCollection`
/// with `Int` indices, and an array literal makes one. ``array`` returns the records as a
/// standard `Array` without copying them.
///
/// A mirror's array also keeps an index from record id to position, so the mirror finds a
/// record in constant time (``firstIndex(ofRecordID:)``), and each mutation notes the ids it
/// touched. That is what lets `mirror.dataModel[i].title = "x"` cost the same with ten
/// records or a hundred thousand.
///
/// > Important: Within one mirror, record ids are unique. A mutation that leaves two records
/// > with one id in `Mirror.dataModel` keeps one: the newest value, in the place of the
/// > record the mirror already had, or of the first copy (see "One record per id" in
/// > ``Mirror/dataModel``).
public struct RecordArray<Record: Recordable>: RandomAccessCollection, MutableCollection,
    RangeReplaceableCollection, ExpressibleByArrayLiteral, Sendable
{
    /// The records.
    public typealias Element = Record
    /// Positions are offsets from the start, as in `Array`.
    public typealias Index = Int
    /// The valid positions.
    public typealias Indices = Range<Int>
    /// A contiguous part of the array.
    public typealias SubSequence = Slice<RecordArray<Record>>

    // The stored properties below are internal, not private, for the mirror's side of the
    // array (RecordArray+Tracking.swift); nothing else touches them.

    /// The records, in order.
    var elements: [Record]
    /// Present in a mirror's array only; `nil` in arrays made by other code.
    var tracking: RecordPositions?
    /// While mutations are logged (``beginLog(session:)``): the record each touched id named
    /// before the first mutation that touched it (`nil`: none), `before[i]` for the log's
    /// `touched[i]`. These before-images are what the mirror compares an edit with.
    var before: [Record?] = []
    /// Set while the array is lent for a mirror's in-place edit: it leaves a copy of itself
    /// there between its mutations (see ``LentArrayCopy``).
    var lend: LentArrayCopy<Record>?

    // MARK: Creating

    /// Creates an empty array.
    public init() {
        elements = []
    }

    /// Creates an array of the given records.
    public init<S: Sequence>(_ records: S) where S.Element == Record {
        elements = Array(records)
    }

    /// Creates an array of the given records.
    public init(arrayLiteral records: Record...) {
        elements = records
    }

    /// The records as a standard array. Constant time: the storage is shared, not copied.
    public var array: [Record] { elements }

    // MARK: Collection

    /// Always 0.
    public var startIndex: Int { 0 }
    /// The number of records: one past the last position.
    public var endIndex: Int { elements.count }
    /// The number of records.
    public var count: Int { elements.count }
    /// Whether there are no records.
    public var isEmpty: Bool { elements.isEmpty }
    /// `0..<count`.
    public var indices: Range<Int> { 0..<elements.count }
    /// `i + 1`.
    public func index(after i: Int) -> Int { i + 1 }
    /// `i - 1`.
    public func index(before i: Int) -> Int { i - 1 }
    /// `i + distance`.
    public func index(_ i: Int, offsetBy distance: Int) -> Int { i + distance }
    /// `end - start`.
    public func distance(from start: Int, to end: Int) -> Int { end - start }

    /// The record at `position`.
    ///
    /// Setting it, or changing one of its fields in place (`array[i].title = "x"`), takes
    /// constant time.
    public subscript(position: Int) -> Record {
        get { elements[position] }
        set {
            guard tracking != nil else {
                elements[position] = newValue
                return
            }
            lend?.takeBack()
            defer { leaveCopy() }
            let oldID = elements[position].recordID
            let newID = newValue.recordID
            noteTouched(elements[position])
            if newID == oldID {
                elements[position] = newValue
                return
            }
            noteTouched(entering: newID)
            tracking!.unregister(oldID)
            elements[position] = newValue
            tracking!.register(newID, at: position)
        }
        _modify {
            if tracking == nil {
                yield &elements[position]
            } else {
                lend?.takeBack()
                let oldID = elements[position].recordID
                noteTouched(elements[position])
                defer {
                    let newID = elements[position].recordID
                    if newID != oldID {
                        // The record now at `position` is not the one `newID` named before.
                        noteTouched(entering: newID, skipping: position)
                        tracking!.unregister(oldID)
                        tracking!.register(newID, at: position)
                    }
                    leaveCopy()
                }
                yield &elements[position]
            }
        }
    }

    /// Calls `body` with the records' contiguous storage.
    public func withContiguousStorageIfAvailable<R>(
        _ body: (UnsafeBufferPointer<Record>) throws -> R
    ) rethrows -> R? {
        try elements.withContiguousStorageIfAvailable(body)
    }

    /// Exchanges two records. Constant time; reorders without changing any record.
    public mutating func swapAt(_ i: Int, _ j: Int) {
        guard i != j else { return }
        lend?.takeBack()
        defer { leaveCopy() }
        elements.swapAt(i, j)
        tracking?.moved(elements[i].recordID, to: i)
        tracking?.moved(elements[j].recordID, to: j)
    }

    // MARK: RangeReplaceableCollection

    /// Replaces the records in `subrange` with `newElements`.
    ///
    /// Takes time in proportion to the records replaced and inserted, plus the records after
    /// them when the count changes (as for `Array`).
    public mutating func replaceSubrange<C: Collection>(
        _ subrange: Range<Int>, with newElements: C
    ) where C.Element == Record {
        guard tracking != nil else {
            elements.replaceSubrange(subrange, with: newElements)
            return
        }
        lend?.takeBack()
        defer { leaveCopy() }
        let oldCount = elements.count
        let added = Array(newElements)
        for index in subrange {
            noteTouched(elements[index])
            tracking!.unregister(elements[index].recordID)
        }
        for record in added { noteTouched(entering: record.recordID) }
        elements.replaceSubrange(subrange, with: added)
        if added.count != subrange.count, subrange.upperBound < oldCount {
            tracking!.shifted(from: subrange.lowerBound)
        }
        for (offset, record) in added.enumerated() {
            tracking!.register(record.recordID, at: subrange.lowerBound + offset)
        }
    }

    /// Reserves room for `minimumCapacity` records.
    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        lend?.takeBack()
        defer { leaveCopy() }
        elements.reserveCapacity(minimumCapacity)
        tracking?.reserveCapacity(minimumCapacity)
    }

    /// Adds a record at the end. Amortized constant time.
    public mutating func append(_ record: Record) {
        guard tracking != nil else {
            elements.append(record)
            return
        }
        lend?.takeBack()
        defer { leaveCopy() }
        let id = record.recordID
        noteTouched(entering: id)
        elements.append(record)
        tracking!.register(id, at: elements.count - 1)
    }

    /// Adds records at the end.
    public mutating func append<S: Sequence>(contentsOf records: S) where S.Element == Record {
        guard tracking != nil else {
            elements.append(contentsOf: records)
            return
        }
        for record in records { append(record) }
    }

    /// Inserts a record at `index`, moving the records after it (as for `Array`).
    public mutating func insert(_ record: Record, at index: Int) {
        guard tracking != nil else {
            elements.insert(record, at: index)
            return
        }
        lend?.takeBack()
        defer { leaveCopy() }
        let id = record.recordID
        noteTouched(entering: id)
        elements.insert(record, at: index)
        if index < elements.count - 1 { tracking!.shifted(from: index) }
        tracking!.register(id, at: index)
    }

    /// Removes and returns the record at `index`, moving the records after it (as for
    /// `Array`).
    @discardableResult
    public mutating func remove(at index: Int) -> Record {
        guard tracking != nil else { return elements.remove(at: index) }
        lend?.takeBack()
        defer { leaveCopy() }
        noteTouched(elements[index])
        let record = elements.remove(at: index)
        tracking!.unregister(record.recordID)
        if index < elements.count { tracking!.shifted(from: index) }
        return record
    }

    /// Removes and returns the last record. Constant time.
    @discardableResult
    public mutating func removeLast() -> Record {
        precondition(!elements.isEmpty, "Can't remove last element from an empty collection")
        return remove(at: elements.count - 1)
    }

    /// Removes and returns the first record, moving the others.
    @discardableResult
    public mutating func removeFirst() -> Record {
        precondition(!elements.isEmpty, "Can't remove first element from an empty collection")
        return remove(at: 0)
    }

    /// Removes every record.
    public mutating func removeAll(keepingCapacity keepCapacity: Bool = false) {
        guard tracking != nil else {
            elements.removeAll(keepingCapacity: keepCapacity)
            return
        }
        lend?.takeBack()
        defer { leaveCopy() }
        for record in elements { noteTouched(record) }
        tracking!.removeAll(keepingCapacity: keepCapacity)
        elements.removeAll(keepingCapacity: keepCapacity)
    }

    /// Removes the records that satisfy `shouldBeRemoved`, keeping the others in order.
    /// Calls the predicate once per record; removes nothing when it throws.
    public mutating func removeAll(where shouldBeRemoved: (Record) throws -> Bool) rethrows {
        var kept: [Record] = []
        kept.reserveCapacity(elements.count)
        var removed: [Record] = []
        var firstRemoved: Int?
        for (index, record) in elements.enumerated() {
            if try shouldBeRemoved(record) {
                if firstRemoved == nil { firstRemoved = index }
                if tracking != nil { removed.append(record) }
            } else {
                kept.append(record)
            }
        }
        guard let firstRemoved else { return }
        guard tracking != nil else {
            elements = kept
            return
        }
        lend?.takeBack()
        defer { leaveCopy() }
        for record in removed {
            noteTouched(record)
            tracking!.unregister(record.recordID)
        }
        elements = kept
        tracking!.shifted(from: firstRemoved)
    }

    // MARK: Finding records by id

    /// The position of the record with the given id, or `nil`.
    ///
    /// Constant time on a mirror's array; a linear scan on arrays made by other code.
    public func firstIndex(ofRecordID recordID: String) -> Int? {
        if let tracking { return tracking.lookUp(recordID, in: elements) }
        return elements.firstIndex { IDKey.same($0.recordID, recordID) }
    }

    /// The record with the given id: read, edit, replace or remove it in one step.
    ///
    /// Use it instead of an index whenever other writers may change the array between
    /// finding a record and editing it: a position found earlier can name another record
    /// once a remote change was applied, while an id always names the same one. Through
    /// ``Mirror/dataModel``, the lookup and the edit happen in one step under the mirror's
    /// lock. For example:
    ///
    /// ```swift
    /// todos.dataModel[recordID: todo.recordID]?.done = true   // edits that record, or nothing
    /// todos.dataModel[recordID: todo.recordID] = nil          // removes it
    /// ```
    ///
    /// Setting a record when none has the id appends it. Constant time on a mirror's array.
    ///
    /// > Important: A record set here must have the id it is set under.
    public subscript(recordID recordID: String) -> Record? {
        get { firstIndex(ofRecordID: recordID).map { self[$0] } }
        set {
            if let newValue {
                precondition(
                    IDKey.same(newValue.recordID, recordID),
                    "dataModel[recordID: \"\(recordID)\"] was set to the record \"\(newValue.recordID)\"; "
                        + "a record can only be set under its own id")
            }
            switch (firstIndex(ofRecordID: recordID), newValue) {
            case (let index?, let record?): self[index] = record
            case (let index?, nil): remove(at: index)
            case (nil, let record?): append(record)
            case (nil, nil): break
            }
        }
    }

    /// Removes the record with the given id, if there is one.
    ///
    /// - Returns: The removed record, or `nil` when no record has the id.
    @discardableResult
    public mutating func remove(recordID: String) -> Record? {
        guard let index = firstIndex(ofRecordID: recordID) else { return nil }
        return remove(at: index)
    }
}

extension RecordArray: Equatable {
    /// Two arrays are equal when they hold equal records in the same order.
    public static func == (lhs: RecordArray, rhs: RecordArray) -> Bool {
        lhs.elements == rhs.elements
    }
}

extension RecordArray: CustomStringConvertible, CustomDebugStringConvertible {
    /// The records, written as an array.
    public var description: String { elements.description }
    /// The records, written as an array, with the type's name.
    public var debugDescription: String { "RecordArray(\(elements.debugDescription))" }
}
