// The mirror's side of its array: the id index it keeps, the log of what each mutation
// touched (with before-images), and the copy a lent array leaves with the mirror.

extension RecordArray {
    /// Whether the array keeps an id index.
    var isTracked: Bool { tracking != nil }

    /// Whether two records share an id (only known for a tracked array; `false` otherwise).
    var mayHaveDuplicates: Bool { tracking?.hasDuplicates ?? false }

    /// Starts keeping an id index. Linear time.
    ///
    /// - Parameter ids: The records' ids, in order, when the caller has them already.
    mutating func startTracking(ids: [String]? = nil) {
        if let ids {
            tracking = RecordPositions(indexing: ids)
        } else {
            tracking = RecordPositions(indexing: elements)
        }
    }

    /// ``startTracking(ids:)`` for records whose ids are the keys of `table`, in order: the
    /// index shares the table's ids and the table that finds them.
    mutating func startTracking<Value>(indexOf table: IDMap<Value>) {
        precondition(table.count == elements.count, "one id per record")
        tracking = RecordPositions(indexing: table)
    }

    /// Rebuilds the id index from scratch. Linear time.
    mutating func rebuildPositions() {
        guard tracking != nil else { return }
        tracking!.rebuild(indexing: elements)
    }

    /// What the mutations since ``beginLog(session:)`` did: the ids they touched, each with
    /// its before-image.
    struct EditLog {
        /// The ids touched, in the order they were first touched, each once.
        let touched: [String]
        /// `before[i]`: the record with the id `touched[i]` before the first mutation that
        /// touched it; `nil` when there was none.
        let before: [Record?]
        /// Whether a mutation added a record under an id the array held.
        let sawDuplicate: Bool
    }

    /// Starts logging the ids that mutations touch, with their before-images.
    mutating func beginLog(session: UInt64) {
        tracking?.log = RecordPositions.ChangeLog(session: session)
        before = []
    }

    /// Stops logging and returns the log of `session`; `nil` when the array no longer holds
    /// it (the array was replaced as a whole during the mutation).
    mutating func endLog(session: UInt64) -> EditLog? {
        guard tracking != nil, let log = tracking!.log else { return nil }
        tracking!.log = nil
        let images = before
        before = []
        guard log.session == session else { return nil }
        return EditLog(touched: log.touched, before: images, sawDuplicate: log.sawDuplicate)
    }

    /// Notes that the current mutation touches `record`, a record of the array as it is
    /// before the mutation: the first time, it is its id's before-image.
    mutating func noteTouched(_ record: Record) {
        if tracking!.noteTouched(record.recordID) { before.append(record) }
    }

    /// Notes that the current mutation touches `id`, the id of a record entering the array:
    /// the first time, its before-image is the record with that id the array holds before
    /// the mutation, found through the index (call it before the elements change), or none.
    ///
    /// - Parameter skipping: A position whose record does not count (see
    ///   ``RecordPositions/positionOfUntouched(_:in:skipping:)``).
    mutating func noteTouched(entering id: String, skipping: Int? = nil) {
        guard tracking!.noteTouched(id) else { return }
        let position = tracking!.positionOfUntouched(id, in: elements, skipping: skipping)
        before.append(position.map { elements[$0] })
    }

    // MARK: Lending (for the mirror)

    /// Lends the array for a mirror's in-place edit: until ``endLend(from:)``, it leaves a
    /// copy of itself with `copy` whenever it is not being mutated.
    mutating func lend(to copy: LentArrayCopy<Record>) {
        lend = copy
        leaveCopy()
    }

    /// Ends the lending; whether the array was lent to `copy` (or is a copy of one that was):
    /// `false` when the edit put another array in its place.
    mutating func endLend(from copy: LentArrayCopy<Record>) -> Bool {
        defer { lend = nil }
        return lend === copy
    }

    /// Leaves a copy of the records and the log with the mirror the array is lent to.
    func leaveCopy() {
        lend?.keep(LentArrayCopy.Kept(elements: elements, touched: tracking?.log?.touched ?? [], before: before))
    }

    /// The position of the record with the given id; repairs stale index entries.
    mutating func position(of recordID: String) -> Int? {
        guard tracking != nil else { return elements.firstIndex { IDKey.same($0.recordID, recordID) } }
        return tracking!.position(of: recordID, in: elements)
    }

    /// The record with the given id.
    mutating func record(withID recordID: String) -> Record? {
        position(of: recordID).map { elements[$0] }
    }
}
