import Foundation
import Observation
import Synchronization

/// A filtered, sorted and possibly limited view of a ``Mirror`` that keeps itself up to
/// date: every local and remote change to the mirror reaches it at once.
///
/// Make one with ``Mirror/view(where:sortedBy:limit:)-(_,RecordOrder<Record>,_)``:
///
/// ```swift
/// let open = todos.view(where: \.done == false, sortedBy: \.title, limit: 50)
/// open.records          // the first 50 open to-dos by title, now
/// open[0].done = true   // edits the record in the mirror: it leaves the view
/// ```
///
/// ## Cost
///
/// A view keeps every record that passes its filter in an ordered index (sorted chunks
/// with a Fenwick tree of their sizes), so each change to the mirror costs the view
/// O(log n) comparisons and a bounded shift within one chunk, whatever the number of
/// records; it never sorts again. A limit only bounds what the view shows: records beyond
/// it are still indexed, so the next one moves up when one leaves. Reading ``records``
/// copies the records shown; ``count`` and the subscript take O(log n).
///
/// ## Writing
///
/// Setting an element (`view[i] = record`, `view[i].done = true`) edits that record in the
/// mirror, ``append(_:)`` appends to the mirror, ``remove(at:)`` removes the record from
/// the mirror and ``move(from:to:orderKey:)`` stores a new place for it. Each is committed
/// like any change to ``Mirror/dataModel`` and shows in the view at once: a record edited
/// so that it no longer passes the filter leaves the view, one appended that does not pass
/// it is stored but not shown.
///
/// ## Observing
///
/// `LiveView` is `Observable`: reading ``records``, ``count`` or an element inside
/// `withObservationTracking` (or a SwiftUI view) tracks the view. ``changes()`` delivers the
/// positions that changed, for animating inserts, removals and moves.
///
/// ## Threads
///
/// The filter, the order and records' `==` run with no lock held, on the thread that
/// changed the mirror (or that made the view): they may read the mirror and its views. A
/// change reaches the view whole: the records one pull brings in show all at once, never
/// some of them.
public final class LiveView<Record: Recordable>: Sendable {
    /// The mirror the view shows.
    public let mirror: Mirror<Record>
    /// Shows at most this many records; `nil` for all of them.
    public let limit: Int?

    private let number: Int
    private let filter: RecordFilter<Record>
    private let state: Mutex<State>
    /// Wakes the threads that wait for another thread to apply their changes (see
    /// ``applyPending(upTo:)``).
    private let applied = NSCondition()
    let registrar = ObservationRegistrar()
    /// `\.records`, made once (a generic class's key path literal is instantiated at run time
    /// each time it is evaluated).
    private let recordsKey: any KeyPath<LiveView<Record>, [Record]> & Sendable = \LiveView<Record>.records

    /// A record the view holds, with its place in creation order (the tie-breaker).
    struct Entry: Sendable {
        var record: Record
        var order: CreationOrder
    }

    /// Whether the order reads the clock of each record's last change, which can move a
    /// record whose value did not change.
    private let sortsByModification: Bool

    // How a view changes (read this before changing it)
    //
    // The filter, the order and `==` are user code, so they run with no lock held. The view
    // keeps two indexes of its records: `Working.index`, sorted with the order, where each
    // change is worked out, and `State.shown`, what readers see, which only ever replays
    // the positions `Working.index` gave (no comparison, so no user code under `state`).
    //
    // - `state` (a Mutex) guards `shown`, the updates the mirror handed over and not applied
    //   yet (`inbox`, in the order the mirror made them), the counts of updates handed over
    //   and applied, the streams, and `working` while no thread applies. Held for short
    //   sections: no user code, no other lock taken inside except an AsyncStream's.
    //   The mirror hands updates over with its own lock held (core → a view's state).
    // - One thread at a time applies (the one that took `working` out of `state`): it works
    //   a batch out on `working` with no lock held, then, in one section of `state`,
    //   replays it on `shown`, yields the streams' changes, and takes the next batch or puts
    //   `working` back. A batch is everything handed over so far, so a pull's records show
    //   at once.
    // - A thread whose updates another thread applies waits (`applied`, an NSCondition)
    //   until they are, so that a change shows in the view when the edit returns, as before;
    //   unless it is that thread itself (a filter that edits the mirror): it goes on, and
    //   its changes are applied once the batch under way is.

    /// The view's sorted index and the records it holds by id: what the applying thread
    /// works changes out on.
    private struct Working: Sendable {
        var index: OrderedIndex<Entry>
        var members: IDMap<Entry> = [:]
    }

    private struct State: Sendable {
        /// What readers see: ``Working/index`` as of the last batch applied.
        var shown: OrderedIndex<Entry>
        /// `nil` while a thread applies changes (it holds it), or before the view loads.
        var working: Working?
        var inbox: [LiveViewUpdate<Record>] = []
        /// The updates handed over to the view so far, and applied so far.
        var handedOver = 0
        var appliedCount = 0
        var streams: [Int: AsyncStream<LiveViewChange>.Continuation] = [:]
        var nextStream = 0
    }

    /// One change of a batch, replayed on ``State/shown``.
    private enum IndexEdit {
        case remove(at: Int)
        case insert(Entry, at: Int)
    }

    init(mirror: Mirror<Record>, number: Int, filter: RecordFilter<Record>, order: RecordOrder<Record>, limit: Int?) {
        self.mirror = mirror
        self.number = number
        self.filter = filter
        self.limit = limit
        let less: @Sendable (Entry, Entry) -> Bool
        if let areInIncreasingOrder = order.areInIncreasingOrder {
            less = { lhs, rhs in
                if areInIncreasingOrder(lhs.record, rhs.record) { return true }
                if areInIncreasingOrder(rhs.record, lhs.record) { return false }
                return lhs.order < rhs.order
            }
        } else if let newestFirst = order.byModification {
            less = { lhs, rhs in
                if lhs.order.modified != rhs.order.modified {
                    return (lhs.order.modified < rhs.order.modified) != newestFirst
                }
                return lhs.order < rhs.order
            }
        } else {
            less = { $0.order < $1.order }
        }
        sortsByModification = order.byModification != nil
        // `working` is nil until ``load(_:)``: the view's maker is its applying thread.
        state = Mutex(State(shown: OrderedIndex(areInIncreasingOrder: less)))
    }

    deinit {
        for continuation in state.withLock({ $0.streams.values }) { continuation.finish() }
    }

    // MARK: Reading

    /// The records the view shows, in order: those that pass its filter, at most
    /// ``limit`` of them.
    public var records: [Record] {
        registrar.access(self, keyPath: recordsKey)
        return state.withLock { $0.shown.prefix(limit).map(\.record) }
    }

    /// The number of records the view shows.
    public var count: Int {
        registrar.access(self, keyPath: recordsKey)
        return state.withLock { Swift.min($0.shown.count, limit ?? .max) }
    }

    /// Whether the view shows no record.
    public var isEmpty: Bool { count == 0 }

    /// The record at `position` of ``records``.
    ///
    /// Setting it edits the record in the mirror (see "Writing" above): the record with the
    /// new value's id, wherever it is now (the view may have changed since the value was
    /// read); when the mirror has no record with that id, the record at `position`, which
    /// the new value replaces.
    ///
    /// - Parameter position: A position below ``count``.
    public subscript(position: Int) -> Record {
        get {
            registrar.access(self, keyPath: recordsKey)
            return state.withLock { state in
                precondition(position < Swift.min(state.shown.count, limit ?? .max), "position \(position) out of range")
                return state.shown[position].record
            }
        }
        set {
            let id = state.withLock { state in
                precondition(position < Swift.min(state.shown.count, limit ?? .max), "position \(position) out of range")
                return state.shown[position].record.recordID
            }
            mirror.dataModel.replaceRecord(newValue, orRecordWithID: id)
        }
    }

    // MARK: Writing

    /// Appends `record` to the mirror. It shows in the view when it passes the filter, at
    /// its place in the view's order.
    ///
    /// - Parameter record: The new record.
    public func append(_ record: Record) {
        mirror.dataModel.append(record)
    }

    /// Removes the record at `position` of ``records`` from the mirror.
    ///
    /// - Parameter position: A position below ``count``.
    /// - Returns: The removed record.
    @discardableResult
    public func remove(at position: Int) -> Record {
        let record = self[position]
        mirror.dataModel.removeRecord(record.recordID)
        return record
    }

    /// Moves the record at `source` to `destination` in a view sorted by `orderKey`,
    /// ascending, by giving it a key between those of its new neighbours (fractional
    /// indexing), so that the new order is stored and every process shows it.
    ///
    /// ```swift
    /// let list = todos.view(sortedBy: \.position)
    /// list.move(from: 2, to: 0, orderKey: \.position)
    /// ```
    ///
    /// Only the moved record changes, so moves made at the same time in several processes
    /// never conflict unless they move the same record (the conflict policy then decides);
    /// two records moved into the same gap get the same key and keep their creation order,
    /// the same everywhere. Each move halves a gap: after about 50 moves into one gap the
    /// keys no longer differ, and records keep their creation order there.
    ///
    /// - Parameters:
    ///   - source: The position of the record to move, below ``count``.
    ///   - destination: Its position once moved, below ``count``.
    ///   - orderKey: The field the view is sorted by, ascending.
    public func move(from source: Int, to destination: Int, orderKey: WritableKeyPath<Record, Double>) {
        let (record, before, after) = state.withLock { state -> (Record, Record?, Record?) in
            let shown = Swift.min(state.shown.count, limit ?? .max)
            precondition(source < shown && destination < shown, "positions \(source), \(destination) out of range")
            // The neighbours at `destination` once the record is out of the way.
            func other(_ position: Int) -> Record? {
                guard position >= 0 else { return nil }
                let index = position < source ? position : position + 1
                return index < state.shown.count ? state.shown[index].record : nil
            }
            return (state.shown[source].record, other(destination - 1), other(destination))
        }
        guard source != destination else { return }
        let low = before?[keyPath: orderKey]
        let high = after?[keyPath: orderKey]
        var moved = record
        switch (low, high) {
        case let (low?, high?): moved[keyPath: orderKey] = low + (high - low) / 2
        case let (low?, nil): moved[keyPath: orderKey] = low + 1
        case let (nil, high?): moved[keyPath: orderKey] = high - 1
        case (nil, nil): return
        }
        mirror.dataModel.replaceRecord(moved, orRecordWithID: record.recordID)
    }

    // MARK: Observing

    /// A new sequence of every change to the positions of ``records`` from now on, in
    /// order, until the view is deallocated (when the sequence ends). Each call returns a
    /// new sequence that gets every change made after the call.
    ///
    /// ```swift
    /// for await change in view.changes() {
    ///     if case .inserted(let position) = change { print("new row at", position) }
    /// }
    /// ```
    public func changes() -> AsyncStream<LiveViewChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: LiveViewChange.self)
        let key = state.withLock { state in
            let key = state.nextStream
            state.nextStream += 1
            state.streams[key] = continuation
            return key
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: key) }
        }
        return stream
    }

    // MARK: Updating (called by the mirror)

    /// Fills the view from the mirror's records, with no lock held (the filter and the
    /// order run here), then applies the updates handed over meanwhile. Called once, by the
    /// view's maker, which is its applying thread until then.
    func load(_ records: [(Record, CreationOrder)]) {
        let entries = records.filter { filter.isIncluded($0.0) }.map { Entry(record: $0.0, order: $0.1) }
        var working = Working(index: state.withLock { $0.shown })
        working.index.load(entries)
        for entry in entries { working.members[entry.record.recordID] = entry }
        let sorted = working.index.prefix(nil)
        state.withLock { $0.shown.load(sorted: sorted) }
        applyBatches(working)
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
        let (done, working) = state.withLock { state -> (Bool, Working?) in
            state.appliedCount >= count ? (true, nil) : (false, state.working.take())
        }
        if done { return }
        if let working {
            applyBatches(working)
            return
        }
        // Another thread applies: wait for it, unless it is this one (a filter or an order
        // that changes the mirror), which applies these once its batch is done.
        guard !LiveViewApplying.views.contains(ObjectIdentifier(self)) else { return }
        applied.lock()
        defer { applied.unlock() }
        while state.withLock({ $0.appliedCount < count && $0.working == nil }) { applied.wait() }
        // Put back before they were applied: apply what is left here.
        if let working = state.withLock({ $0.appliedCount >= count ? nil : $0.working.take() }) {
            applied.unlock()
            applyBatches(working)
            applied.lock()
        }
    }

    /// Applies batch after batch, each worked out on `working` with no lock held and shown
    /// at once, until none is left; then puts `working` back.
    private func applyBatches(_ working: consuming Working) {
        var working = working
        var changed = false
        LiveViewApplying.$views.withValue(LiveViewApplying.views + [ObjectIdentifier(self)]) {
            var batch = state.withLock { state in
                defer { state.inbox = [] }
                return state.inbox
            }
            while true {
                var edits: [IndexEdit] = []
                var changes: [LiveViewChange] = []
                for update in batch { work(update, on: &working, edits: &edits, changes: &changes) }
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
                    if state.inbox.isEmpty { state.working = working }
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

    /// Notifies observers after a change, once the mirror's lock is released.
    func notifyObservers() {
        registrar.willSet(self, keyPath: recordsKey)
        registrar.didSet(self, keyPath: recordsKey)
    }
}

extension LiveView: Observable {}

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
