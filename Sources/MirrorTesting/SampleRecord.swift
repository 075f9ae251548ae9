import Foundation
import MagicMirror

/// A ready-made `Recordable` type for tests: a to-do item with a unique id and fields of
/// several kinds.
///
/// Use it when a test needs records but not your own type:
///
/// ```swift
/// let database = InMemoryDatabase()
/// let mirror = try await Mirror<SampleRecord>(database: database)
/// mirror.dataModel.append(SampleRecord(title: "Milk"))
/// ```
///
/// Every value made with ``init(id:title:isDone:priority:created:note:)`` gets a new
/// `UUID`, so ids never collide, however fast values are made. (MagicCloud's
/// `MockRecordable` derived its record id from the time it was made, to the second, so
/// two mocks made within the same second got the same id and silently replaced each other
/// in the database; tests that made several mocks in a row failed or, worse, passed for
/// the wrong reason.)
///
/// Its fields cover the kinds of values that must survive a round trip through a
/// database: a `String`, a `Bool`, an `Int`, a `Date` and an optional.
public struct SampleRecord: Recordable, Hashable, CustomStringConvertible {
    /// The record's identity; its ``recordID`` is the UUID's string.
    public var id: UUID
    /// A title.
    public var title: String
    /// Whether the item is done.
    public var isDone: Bool
    /// A priority.
    public var priority: Int
    /// When the item was made.
    ///
    /// Whole seconds by default, so that it comes back equal through any date encoding
    /// (ISO 8601 keeps no fractions of a second).
    public var created: Date
    /// An optional note; `nil` by default.
    public var note: String?

    /// Creates a record with a new unique id.
    ///
    /// - Parameters:
    ///   - id: The record's identity; a new `UUID` by default.
    ///   - title: A title; `"Sample"` by default.
    ///   - isDone: Whether the item is done; `false` by default.
    ///   - priority: A priority; 0 by default.
    ///   - created: When the item was made; now, rounded down to the whole second, by
    ///     default.
    ///   - note: An optional note.
    public init(
        id: UUID = UUID(), title: String = "Sample", isDone: Bool = false, priority: Int = 0,
        created: Date = SampleRecord.wholeSecondNow(), note: String? = nil
    ) {
        self.id = id
        self.title = title
        self.isDone = isDone
        self.priority = priority
        self.created = created
        self.note = note
    }

    /// `count` records titled `"<prefix> 0"`, `"<prefix> 1"`, …, with priorities 0, 1, …,
    /// each with its own id.
    ///
    /// - Parameters:
    ///   - count: How many records to make.
    ///   - prefix: The start of each title.
    public static func many(_ count: Int, titled prefix: String = "Sample") -> [SampleRecord] {
        (0..<max(count, 0)).map { SampleRecord(title: "\(prefix) \($0)", priority: $0) }
    }

    /// The current time, rounded down to the whole second.
    public static func wholeSecondNow() -> Date {
        Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    }

    /// The title, state, priority, note and the start of the id, on one line.
    public var description: String {
        var text = "SampleRecord(\(title.debugDescription), \(isDone ? "done" : "open"), priority \(priority)"
        if let note { text += ", note \(note.debugDescription)" }
        return text + ", id \(id.uuidString.prefix(8)))"
    }
}
