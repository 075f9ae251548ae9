/// One change to the records a ``LiveView`` shows, by position, for animating a list.
///
/// A view delivers its changes in order on ``LiveView/changes()``; each applies to the records
/// as the previous one left them (as in a sequence of array operations), so a UI that
/// applies them one by one to its rows ends with ``LiveView/records``.
public enum LiveViewChange: Sendable, Hashable {
    /// A record appeared at this position.
    case inserted(at: Int)
    /// The record at this position left the view.
    case removed(at: Int)
    /// The record at `from` moved to `to` (its position once it is there).
    ///
    /// A record moves because its value changed (the field it is sorted by, at least): the
    /// view then delivers ``updated(at:)`` for position `to` right after the move. Move the
    /// row as it is on `.moved`, and reload it on the `.updated` that follows, as a table
    /// view's `moveRow` and `reloadRows` do.
    case moved(from: Int, to: Int)
    /// The record at this position has a new value: it changed in place, or it is the
    /// record a ``moved(from:to:)`` just moved.
    case updated(at: Int)
}
