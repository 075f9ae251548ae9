/// Which records a ``LiveView`` shows: a predicate on one record.
///
/// Write it from key paths and operators, or with a closure for anything else:
///
/// ```swift
/// let open: RecordFilter<Todo> = \.done == false
/// let urgent: RecordFilter<Todo> = \.done == false && \.priority >= 2
/// let milk = RecordFilter<Todo> { $0.title.contains("milk") }
/// ```
///
/// > Important: The predicate runs on the thread that changed the mirror, about once per
/// > changed record, so keep it quick and free of side effects: when threads change one
/// > mirror at once, a change may be worked out again. It runs with no lock of the mirror
/// > or its views held, so it may read them (see ``LiveView``).
public struct RecordFilter<Record: Recordable>: Sendable {
    let isIncluded: @Sendable (Record) -> Bool

    /// A filter that keeps the records for which `isIncluded` returns `true`.
    ///
    /// - Parameter isIncluded: Decides for one record; quick.
    public init(_ isIncluded: @escaping @Sendable (Record) -> Bool) {
        self.isIncluded = isIncluded
    }

    /// Every record.
    public static var all: RecordFilter { RecordFilter { _ in true } }

    /// Both filters keep the record.
    public static func && (lhs: RecordFilter, rhs: RecordFilter) -> RecordFilter {
        RecordFilter { lhs.isIncluded($0) && rhs.isIncluded($0) }
    }

    /// Either filter keeps the record.
    public static func || (lhs: RecordFilter, rhs: RecordFilter) -> RecordFilter {
        RecordFilter { lhs.isIncluded($0) || rhs.isIncluded($0) }
    }

    /// The filter does not keep the record.
    public static prefix func ! (filter: RecordFilter) -> RecordFilter {
        RecordFilter { !filter.isIncluded($0) }
    }
}

/// Keeps the records whose value at `keyPath` equals `value`: `\.done == false`.
public func == <Record: Recordable, Value: Equatable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] == value }
}

/// Keeps the records whose value at `keyPath` differs from `value`: `\.owner != "bob"`.
public func != <Record: Recordable, Value: Equatable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] != value }
}

/// Keeps the records whose value at `keyPath` is below `value`.
public func < <Record: Recordable, Value: Comparable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] < value }
}

/// Keeps the records whose value at `keyPath` is at most `value`.
public func <= <Record: Recordable, Value: Comparable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] <= value }
}

/// Keeps the records whose value at `keyPath` is above `value`.
public func > <Record: Recordable, Value: Comparable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] > value }
}

/// Keeps the records whose value at `keyPath` is at least `value`.
public func >= <Record: Recordable, Value: Comparable & Sendable>(
    keyPath: any KeyPath<Record, Value> & Sendable, value: Value
) -> RecordFilter<Record> {
    RecordFilter { $0[keyPath: keyPath] >= value }
}
