import Foundation
import Observation
import Synchronization

// How a view takes the mirror's changes: handed over under the mirror's lock, worked out
// with no lock held, shown in one section (see "How a view changes" in LiveView.swift).

extension LiveView {
    /// Fills the view from the mirror's records, with no lock held (the filter and the
    /// order run here), then applies the updates handed over meanwhile. Called once, by the
    /// view's maker, which is its applying thread until then.
    func load(_ records: [(Record, CreationOrder)]) {
        let entries = records.filter { filter.isIncluded($0.0) }.map { Entry(record: $0.0, order: $0.1) }
        var working: Working? = Working(index: state.withLock { $0.shown })
        working!.index.load(entries)
        for entry in entries { working!.members[entry.record.recordID] = entry }
        let sorted = working!.index.prefix(nil)
        state.withLock { $0.shown.load(sorted: sorted) }
        applyBatches(&working)
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
    /// the first `count` are applied (by this thread, or by the thread applying the view's
    /// changes now), and notifies the view's observers when what it shows changed.
    func applyPending(upTo count: Int) {
        // Taken out of `state`, never copied: a copy would make the next change copy the
        // whole index and table of members.
        var working: Working?
        let done = state.withLock { state in
            if state.appliedCount >= count { return true }
            swap(&working, &state.working)
            return false
        }
        if done { return }
        if working != nil {
            applyBatches(&working)
            return
        }
        // Another thread applies: wait for it, unless it is this one (a filter or an order
        // that changes the mirror), which applies these once its batch is done.
        guard !LiveViewApplying.views.contains(ObjectIdentifier(self)) else { return }
        applied.lock()
        defer { applied.unlock() }
        while state.withLock({ $0.appliedCount < count && $0.working == nil }) { applied.wait() }
        // Put back before they were applied: apply what is left here.
        state.withLock { state in
            if state.appliedCount < count { swap(&working, &state.working) }
        }
        if working != nil {
            applied.unlock()
            applyBatches(&working)
            applied.lock()
        }
    }

    /// Applies batch after batch, each worked out on `working` with no lock held and shown
    /// at once, until none is left; then moves `working` back into `state`, leaving `nil`.
    private func applyBatches(_ working: inout Working?) {
        var changed = false
        LiveViewApplying.$views.withValue(LiveViewApplying.views + [ObjectIdentifier(self)]) {
            var batch = state.withLock { state in
                defer { state.inbox = [] }
                return state.inbox
            }
            while true {
                var edits: [IndexEdit] = []
                var changes: [LiveViewChange] = []
                for update in batch { work(update, on: &working!, edits: &edits, changes: &changes) }
                if !changes.isEmpty { changed = true }
                batch = state.withLock { state in
                    for edit in edits {
                        switch edit {
                        case .remove(let position): state.shown.remove(at: position)
                        case .insert(let entry, let position): state.shown.insert(entry, at: position)
                        }
                    }
                    for continuation in state.streams.values {
                        for change in changes { continuation.yield(change) }
                    }
                    state.appliedCount += batch.count
                    if state.inbox.isEmpty { swap(&state.working, &working) }
                    defer { state.inbox = [] }
                    return state.inbox
                }
                if batch.isEmpty { break }
            }
        }
        applied.lock()
        applied.broadcast()
        applied.unlock()
        if changed { notifyObservers() }
    }

    /// Works out one update on `working` (the filter, the order and `==` run here): the
    /// edits to replay on what readers see, and the changes to tell the streams.
    private func work(
        _ update: LiveViewUpdate<Record>, on working: inout Working, edits: inout [IndexEdit],
        changes: inout [LiveViewChange]
    ) {
        let (id, value, order) = (update.id, update.value, update.order)
        let included = value.map(filter.isIncluded) ?? false
        let old = working.members[id]
        guard old != nil || included else { return }
        if let old, included, old.record == value, old.order.created == order.created,
           !sortsByModification || old.order.modified == order.modified {
            return
        }
        let window = limit ?? .max
        let countBefore = working.index.count
        let oldPosition = old.flatMap { working.index.remove($0) }
        if let oldPosition { edits.append(.remove(at: oldPosition)) }
        var newPosition: Int?
        if included, let value {
            let entry = Entry(record: value, order: order)
            let position = working.index.insert(entry)
            edits.append(.insert(entry, at: position))
            newPosition = position
            working.members[id] = entry
        } else {
            working.members[id] = nil
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
            if working.index.count >= window { changes.append(.inserted(at: window - 1)) }
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

/// The views whose changes the current thread is applying (a filter or an order that
/// changes the mirror must not wait for itself).
enum LiveViewApplying {
    @TaskLocal static var views: [ObjectIdentifier] = []
}
