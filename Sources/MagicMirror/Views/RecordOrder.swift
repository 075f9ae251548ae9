/// The order of a ``LiveView``: by a key path, by a closure, or the mirror's creation order.
///
/// Records the order does not tell apart keep their creation order (the clock of their
/// first save, then their id), so a view's order is the same in every process.
///
/// ```swift
/// let newestFirst: RecordOrder<Todo> = .descending(\.created)
/// let byLength = RecordOrder<Todo> { $0.title.count < $1.title.count }
/// ```
///
/// > Important: The comparison must be a strict weak order, quick and free of side effects:
/// > it runs on the thread that changed the mirror, O(log n) times per changed record (again
/// > when threads changing one mirror at once make a change be worked out again). It runs
/// > with no lock of the mirror or its views held, so it may read them (see ``LiveView``).
public struct RecordOrder<Record: Recordable>: Sendable {
    /// `nil` for creation order or an order by modification.
    let areInIncreasingOrder: (@Sendable (Record, Record) -> Bool)?
    /// Sorted by the clock of each record's last change: `true` for the most recent first,
    /// `false` for the least recent first; `nil` for another order.
    let byModification: Bool?

    /// Orders records with `areInIncreasingOrder`, a strict weak order.
    ///
    /// - Parameter areInIncreasingOrder: Whether the first record goes before the second.
    public init(_ areInIncreasingOrder: @escaping @Sendable (Record, Record) -> Bool) {
        self.areInIncreasingOrder = areInIncreasingOrder
        self.byModification = nil
    }

    private init(byModification: Bool?) {
        areInIncreasingOrder = nil
        self.byModification = byModification
    }

    /// The order records were created in, the default order of ``Mirror/dataModel``.
    public static var creation: RecordOrder { RecordOrder(byModification: nil) }

    /// The record changed longest ago first: by the clock of each record's last change, the
    /// one the database keeps (``StoredRecord/modified``), whoever made it.
    ///
    /// A local change not committed yet counts from when it was made. Every process sees
    /// the same order, with no date field in the record:
    ///
    /// ```swift
    /// let stale = todos.view(sortedBy: .lastModified, limit: 10)
    /// ```
    public static var lastModified: RecordOrder { RecordOrder(byModification: false) }

    /// The record changed most recently first (the reverse of ``lastModified``).
    ///
    /// ```swift
    /// let recent = todos.view(sortedBy: .recentlyModified, limit: 10)
    /// ```
    public static var recentlyModified: RecordOrder { RecordOrder(byModification: true) }

    /// Smallest value at `keyPath` first.
    ///
    /// - Parameter keyPath: The value to order by.
    /// - Returns: The order.
    public static func ascending<Value: Comparable & Sendable>(
        _ keyPath: any KeyPath<Record, Value> & Sendable
    ) -> RecordOrder {
        RecordOrder { $0[keyPath: keyPath] < $1[keyPath: keyPath] }
    }

    /// Largest value at `keyPath` first.
    ///
    /// - Parameter keyPath: The value to order by.
    /// - Returns: The order.
    public static func descending<Value: Comparable & Sendable>(
        _ keyPath: any KeyPath<Record, Value> & Sendable
    ) -> RecordOrder {
        RecordOrder { $0[keyPath: keyPath] > $1[keyPath: keyPath] }
    }
}
