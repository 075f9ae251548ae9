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
/// changed the mirror (or that made the view): they may read the mirror and its views, and
/// may run more than once for one change. A change reaches the view whole: the records one
/// pull brings in show all at once, never some of them. A change shows in the view when the
/// edit that made it returns, and no thread waits for another to apply it.
public final class LiveView<Record: Recordable>: Sendable {
    /// The mirror the view shows.
    public let mirror: Mirror<Record>
    /// Shows at most this many records; `nil` for all of them.
    public let limit: Int?

    private let number: Int
    // Internal, not private, for LiveView+Updating.swift.
    let filter: RecordFilter<Record>
    let state: Mutex<State>
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
    let sortsByModification: Bool

    // How a view changes (read this before changing it)
    //
    // The filter, the order and `==` are user code, so they run with no lock held. Readers
    // see `State.shown`, an index sorted with the order that only ever replays positions
    // worked out on another index equal to it (no comparison, so no user code under
    // `state`). No thread waits for another: a thread that waited for the one applying the
    // view's changes would block a thread of Swift's cooperative pool when an async task
    // (a pull, a commit, your own) changed the mirror.
    //
    // - `state` (a Mutex) guards everything: `shown`, the records it holds by id
    //   (`members`), the updates the mirror handed over and not shown yet (`inbox`, in the
    //   order the mirror made them), the counts of updates handed over and shown, the
    //   streams, and `spare`. Held for short sections: no user code, no other lock taken
    //   inside except an AsyncStream's. The mirror hands updates over with its own lock
    //   held (core → a view's state).
    // - A thread that handed updates over applies rounds until they are shown (optimistic,
    //   like a compare-and-swap): it takes the whole inbox, the members those updates
    //   change, and an index equal to `shown` (`spare`, changed in place; or, while another
    //   thread has it out, a copy of `shown`, copied on write as it changes); works the
    //   round out with no lock held; then, in one section, if no other round was shown
    //   meanwhile, replays it on `shown`, stores the members, yields the streams' changes
    //   and puts its index back as `spare`. Otherwise it drops its work and takes the next
    //   round, where its updates may be shown already. A round is everything handed over
    //   so far, so a pull's records show at once; each thread returns once its own updates
    //   are shown, so an edit shows in the view when it returns.
    // - A filter that edits the mirror applies that edit's round from inside the round
    //   under way, which is then out of date and taken again: keep filters free of side
    //   effects, they may run more than once for one change.

    struct State: Sendable {
        /// What readers see: the records that pass the filter, in order, as of the last
        /// round shown.
        var shown: OrderedIndex<Entry>
        /// The records `shown` holds, by id.
        var members: IDMap<Entry> = [:]
        /// An index equal to `shown`, which the next round changes in place; `nil` while a
        /// thread works a round out on it, or before the view loads.
        var spare: OrderedIndex<Entry>?
        /// Whether the view's maker has loaded it: until then, updates wait in `inbox`.
        var isLoaded = false
        var inbox: [LiveViewUpdate<Record>] = []
        /// The updates handed over to the view so far, and shown so far.
        var handedOver = 0
        var appliedCount = 0
        var streams: [Int: AsyncStream<LiveViewChange>.Continuation] = [:]
        var nextStream = 0
    }

    /// One change of a batch, replayed on ``State/shown``.
    enum IndexEdit {
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
        // Empty until ``load(_:)``: the view's maker shows the records first.
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

    /// Notifies observers after a change, once the mirror's lock is released.
    func notifyObservers() {
        registrar.willSet(self, keyPath: recordsKey)
        registrar.didSet(self, keyPath: recordsKey)
    }
}

extension LiveView: Observable {}
