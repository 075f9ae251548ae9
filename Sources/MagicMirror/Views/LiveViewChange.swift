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
    /// The record at `from` moved to `to` (its position once it is there); its value may
    /// have changed too.
    case moved(from: Int, to: Int)
    /// The record at this position changed but kept its place.
    case updated(at: Int)
}
