import Foundation
import Observation
import Synchronization

// How a view takes the mirror's changes: handed over under the mirror's lock, worked out
// with no lock held, shown in one section; no thread ever waits for another (see "How a
// view changes" in LiveView.swift).

extension LiveView {
    /// What a batch's updates found in ``State/members`` when it was taken, then what the
    /// batch made of them: `nil` for a record the view does not hold.
    struct Member: Sendable {
        var entry: Entry?
    }

    /// Fills the view from the mirror's records, with no lock held (the filter and the
    /// order run here), then applies the updates handed over meanwhile. Called once, by the
    /// view's maker: until then, no thread applies updates (they wait in the inbox).
    func load(_ records: [(Record, CreationOrder)]) {
        let entries = records.filter { filter.isIncluded($0.0) }.map { Entry(record: $0.0, order: $0.1) }
        var index: OrderedIndex<Entry>? = state.withLock { $0.shown }
        index!.load(entries)
        var members: IDMap<Entry> = IDMap(minimumCapacity: entries.count)
        for entry in entries { members[entry.record.recordID] = entry }
        let sorted = index!.prefix(nil)
        let handedOver = state.withLock { state in
            state.shown.load(sorted: sorted)
            swap(&state.members, &members)
            swap(&state.spare, &index)
            state.isLoaded = true
            return state.handedOver
        }
        applyPending(upTo: handedOver)
    }

    /// Hands over updates of the mirror's records, in the order the mirror made them
    /// (called with the mirror's lock held: no user code runs here). Returns the count of
    /// updates handed over so far, for ``applyPending(upTo:)``.
    func handOver(_ updates: [LiveViewUpdate<Record>]) -> Int {
        state.withLock { state in
            state.inbox.append(contentsOf: updates)
            state.handedOver += updates.count
            return state.handedOver
        }
    }

    /// Applies the updates handed over, once the mirror's lock is released: returns once
    /// the first `count` are shown, and notifies the view's observers when what it shows
    /// changed. Never waits for another thread.
    ///
    /// Each round takes every update not shown yet, works them out on an index equal to
    /// ``State/shown`` with no lock held, and shows them in one section, unless another
    /// thread showed a batch meanwhile: this round's work is then out of date, and the next
    /// round starts from what is shown now, where this thread's updates may already be.
    /// A round fails only because another was shown, and any round taken after this thread
    /// handed its updates over shows them: so this thread's rounds fail at most once for
    /// each thread that was working a round out when it handed them over.
    func applyPending(upTo count: Int) {
        var changed = false
        while true {
            // Take a round, unless the first `count` are shown (then return).
            var index: OrderedIndex<Entry>?
            var members = IDMap<Member>()
            let taken = state.withLock { state -> (batch: [LiveViewUpdate<Record>], applied: Int)? in
                // Before the view loads, its maker applies what was handed over.
                guard state.isLoaded, state.appliedCount < count else { return nil }
                // The spare index, changed in place; when another thread has it out, a
                // copy of `shown`, copied on write chunk by chunk as this round changes it.
                swap(&index, &state.spare)
                if index == nil { index = state.shown }
                members.reserveCapacity(state.inbox.count)
                for update in state.inbox where members[update.id] == nil {
                    members[update.id] = Member(entry: state.members[update.id])
                }
                return (state.inbox, state.appliedCount)
            }
            guard let (batch, applied) = taken else { break }
            // Work out, with no lock held.
            var edits: [IndexEdit] = []
            var changes: [LiveViewChange] = []
            for update in batch { work(update, on: &index!, members: &members, edits: &edits, changes: &changes) }
            // Show, unless another round was shown since this one was taken.
            let shown = state.withLock { state -> Bool in
                guard state.appliedCount == applied else { return false /* Out of date */ }
                for edit in edits {
                    switch edit {
                    case .remove(let position): state.shown.remove(at: position)
                    case .insert(let entry, let position): state.shown.insert(entry, at: position)
                    }
                }
                for (id, member) in members { state.members[id] = member.entry }
                for continuation in state.streams.values {
                    for change in changes { continuation.yield(change) }
                }
                state.appliedCount += batch.count
                state.inbox.removeFirst(batch.count)
                // `index` now equals `shown`: the next round's spare.
                if state.spare == nil { swap(&state.spare, &index) }
                return true
            }
            if shown, !changes.isEmpty { changed = true }
        }
        if changed { notifyObservers() }
    }

    /// Works out one update on `index` and `members` (the filter, the order and `==` run
    /// here): the edits to replay on what readers see, and the changes to tell the streams.
    private func work(
        _ update: LiveViewUpdate<Record>, on index: inout OrderedIndex<Entry>, members: inout IDMap<Member>,
        edits: inout [IndexEdit], changes: inout [LiveViewChange]
    ) {
        let (id, value, order) = (update.id, update.value, update.order)
        let included = value.map(filter.isIncluded) ?? false
        let old = members[id]?.entry
        guard old != nil || included else { return }
        if let old, included, old.record == value, old.order.created == order.created,
           !sortsByModification || old.order.modified == order.modified {
            return
        }
        let window = limit ?? .max
        let countBefore = index.count
        let oldPosition = old.flatMap { index.remove($0) }
        if let oldPosition { edits.append(.remove(at: oldPosition)) }
        var newPosition: Int?
        if included, let value {
            let entry = Entry(record: value, order: order)
            let position = index.insert(entry)
            edits.append(.insert(entry, at: position))
            newPosition = position
            members[id] = Member(entry: entry)
        } else {
            members[id] = Member(entry: nil)
        }
        let wasShown = oldPosition.map { $0 < window } ?? false
        let isShown = newPosition.map { $0 < window } ?? false
        switch (wasShown, isShown) {
        case (true, true):
            if oldPosition == newPosition {
                changes.append(.updated(at: newPosition!))
            } else {
                // A record moves because its value changed: a move, then the new value
                // at its new place, so that rows moved as they are end up right.
                changes.append(.moved(from: oldPosition!, to: newPosition!))
                if old?.record != value { changes.append(.updated(at: newPosition!)) }
            }
        case (true, false):
            changes.append(.removed(at: oldPosition!))
            // The next record moves up into the last place.
            if index.count >= window { changes.append(.inserted(at: window - 1)) }
        case (false, true):
            changes.append(.inserted(at: newPosition!))
            // The last record shown is pushed out.
            if countBefore >= window { changes.append(.removed(at: window)) }
        case (false, false):
            break
        }
    }
}

/// One change of the mirror's records handed to its views: the record with `id` is now
/// `value` (`nil`: gone), at `order` in creation order.
struct LiveViewUpdate<Record: Recordable>: Sendable {
    let id: String
    let value: Record?
    let order: CreationOrder
}
