extension Mirror {
    /// A live view of the mirror: the records that pass `filter`, in `order`, at most
    /// `limit` of them, kept up to date with every local and remote change.
    ///
    /// ```swift
    /// let open = todos.view(where: \.done == false, sortedBy: .ascending(\.title), limit: 50)
    /// ```
    ///
    /// Each change to the mirror costs the view O(log n) work, whatever the number of
    /// records (see ``LiveView``). Make as many views of one mirror as you need: they share
    /// its records and its subscription.
    ///
    /// - Parameters:
    ///   - filter: The records to show; every record by default.
    ///   - order: Their order; creation order (the default order of ``dataModel``) by
    ///     default. Records the order does not tell apart keep their creation order.
    ///   - limit: Show at most this many records (the first ones in `order`); all of them
    ///     when `nil`. Must not be negative.
    /// - Returns: The view. It keeps the mirror alive.
    public func view(
        where filter: RecordFilter<Record> = .all,
        sortedBy order: RecordOrder<Record> = .creation,
        limit: Int? = nil
    ) -> LiveView<Record> {
        precondition(limit.map { $0 >= 0 } ?? true, "a view's limit must not be negative")
        let (view, records) = core.withLock { engine in
            let number = engine.delivery.makeNumber()
            let view = LiveView(mirror: self, number: number, filter: filter, order: order, limit: limit)
            // From here on, the view gets every change; it applies them once loaded.
            engine.liveViews[number] = LiveViewReference(view: view)
            return (view, engine.records.array.map { record in (record, engine.creationOrder(of: record.recordID)) })
        }
        // The filter and the order run with no lock held.
        view.load(records)
        return view
    }

    /// A live view of the records that pass `filter`, with the smallest value at
    /// `keyPath` first (see ``view(where:sortedBy:limit:)-(_,RecordOrder<Record>,_)``).
    ///
    /// ```swift
    /// let firstFifty = todos.view(where: \.done == false, sortedBy: \.title, limit: 50)
    /// ```
    ///
    /// - Parameters:
    ///   - filter: The records to show; every record by default.
    ///   - keyPath: The value to sort by, smallest first; ties keep creation order.
    ///   - limit: Show at most this many records; all of them when `nil`.
    /// - Returns: The view.
    public func view<Value: Comparable & Sendable>(
        where filter: RecordFilter<Record> = .all,
        sortedBy keyPath: any KeyPath<Record, Value> & Sendable,
        limit: Int? = nil
    ) -> LiveView<Record> {
        view(where: filter, sortedBy: .ascending(keyPath), limit: limit)
    }
}

/// A mirror's weak reference to one of its views (the view keeps the mirror alive, not the
/// other way round).
struct LiveViewReference<Record: Recordable>: Sendable {
    weak var view: LiveView<Record>?
}

extension SyncEngine {
    /// Where the record with `id` sits in the default order: its stored creation clock, or,
    /// for a creation not committed yet, the timestamp its commit will carry; with the clock
    /// of its last change.
    func creationOrder(of id: String) -> CreationOrder {
        Self.creationOrder(of: id, stored: pull.storedRecords, inFlight: queue.inFlight, pending: queue.pending)
    }

    /// ``creationOrder(of:)`` from the tables it reads (which a caller can hold while it
    /// changes the records shown).
    static func creationOrder(
        of id: String, stored: IDMap<StoredRecord>, inFlight: IDMap<PendingEntry<Record>>,
        pending: IDMap<PendingEntry<Record>>
    ) -> CreationOrder {
        // The newest local change not committed yet, if any.
        let local = (pending[id] ?? inFlight[id])?.timestamp
        if let stored = stored[id], !stored.isDeleted {
            return CreationOrder(created: stored.created, id: id, modified: max(stored.modified, local ?? .zero))
        }
        if let entry = inFlight[id] ?? pending[id] {
            return CreationOrder(created: entry.timestamp, id: id, modified: local ?? entry.timestamp)
        }
        return .unknown(id)
    }

    /// Notes for every live view that the record with `id` is now `value` (`nil`: gone):
    /// ``drain(owner:)`` hands the section's updates to the views, which apply them once
    /// the lock is released (their filters and orders are user code).
    mutating func updateLiveViews(_ id: String, _ value: Record?) {
        let order = value == nil ? CreationOrder.unknown(id) : creationOrder(of: id)
        liveViewUpdates.append(LiveViewUpdate(id: id, value: value, order: order))
    }

    /// Hands the updates of the section to every live view, at once (so that a view shows
    /// a pull whole), and returns the views with the count each must have applied.
    mutating func handOverLiveViewUpdates() -> [(view: LiveView<Record>, upTo: Int)] {
        defer { liveViewUpdates.removeAll() }
        var handed: [(view: LiveView<Record>, upTo: Int)] = []
        var gone: [Int] = []
        for (number, reference) in liveViews {
            guard let view = reference.view else {
                gone.append(number)
                continue
            }
            handed.append((view, view.handOver(liveViewUpdates)))
        }
        for number in gone { liveViews[number] = nil }
        return handed
    }
}

extension RecordArray {
    /// Replaces the record with `record`'s id, or, when there is none, the record with
    /// `fallbackID` (which `record` then replaces under a new id).
    mutating func replaceRecord(_ record: Record, orRecordWithID fallbackID: String) {
        if let position = firstIndex(ofRecordID: record.recordID) ?? firstIndex(ofRecordID: fallbackID) {
            self[position] = record
        }
    }

    /// Removes the record with `recordID`, if there is one.
    mutating func removeRecord(_ recordID: String) {
        if let position = firstIndex(ofRecordID: recordID) { remove(at: position) }
    }
}
