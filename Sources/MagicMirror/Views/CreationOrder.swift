/// Where a record sits in a mirror's default order: by creation clock, then by the bytes
/// of its id. Every process computes the same key from the same stored records, so every
/// process and every reopen agree on the order.
struct CreationOrder: Comparable, Sendable {
    /// The record's ``StoredRecord/created`` clock, or the timestamp its pending creation
    /// will be committed with.
    var created: HLCTimestamp
    var id: String
    /// The clock of the record's last change: its ``StoredRecord/modified``, or the
    /// timestamp of its local change not committed yet. Not part of the order: the
    /// ``RecordOrder/lastModified`` and ``RecordOrder/recentlyModified`` orders read it.
    var modified = HLCTimestamp.zero

    static func < (lhs: CreationOrder, rhs: CreationOrder) -> Bool {
        if lhs.created != rhs.created { return lhs.created < rhs.created }
        return lhs.id.utf8.lexicographicallyPrecedes(rhs.id.utf8)
    }

    /// A record the mirror knows nothing about yet goes after every known one.
    static func unknown(_ id: String) -> CreationOrder {
        CreationOrder(
            created: HLCTimestamp(millis: .max, counter: .max), id: id, modified: HLCTimestamp(millis: .max, counter: .max))
    }
}
