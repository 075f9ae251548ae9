import Synchronization

/// What a mirror's array, lent for an in-place edit (`Mirror.dataModel`'s `_modify`), leaves
/// with the mirror between its mutations: its records and its log, with the before-images.
///
/// The mirror keeps no second copy of its records to compare an edit with: the array's log
/// holds the before-image of each record the edit touched (see ``RecordArray/EditLog``).
/// But an edit may also put another array in the place of the lent one (`swap(&mirror.dataModel,
/// &other)`, or a function that assigns its `inout` argument), and the log and the untouched
/// records go with the array it replaced. The copy left here is what the mirror then compares
/// the new array with: the records as they were after the last mutation, which the log's
/// before-images take back to the records before the edit.
///
/// Each mutation takes the copy back first (``takeBack()``), so that the records are still
/// changed in place rather than copied, and leaves a new one after (``keep(_:)``): a few
/// reference counts per mutation. Copies of the lent array share this object; once the
/// mirror ends the edit (``close()``), it keeps nothing more, whichever copy still mutates.
final class LentArrayCopy<Record: Recordable>: Sendable {
    /// A lent array's state after one of its mutations.
    struct Kept: Sendable {
        let elements: [Record]
        /// The ids its log touched, and their before-images at the same positions.
        let touched: [String]
        let before: [Record?]
    }

    /// The copy kept; once closed, nothing, for good.
    private struct State {
        var kept: Kept?
        var isClosed = false
    }

    private let state = Mutex(State())

    init() {}

    /// Lets go of the copy: the array is about to be mutated.
    func takeBack() {
        state.withLock { $0.kept = nil }
    }

    /// Keeps `kept`, the array's state after a mutation, until the next one.
    func keep(_ kept: Kept) {
        state.withLock { state in
            if !state.isClosed { state.kept = kept }
        }
    }

    /// Ends the edit: returns the copy last kept, and keeps nothing from now on.
    @discardableResult
    func close() -> Kept? {
        state.withLock { state in
            defer { state = State(kept: nil, isClosed: true) }
            return state.kept
        }
    }
}
