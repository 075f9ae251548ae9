import Foundation
import Synchronization

/// A hybrid-logical-clock reading: wall-clock milliseconds plus a counter that orders
/// events within one millisecond and keeps causality when clocks are skewed.
///
/// Every stored change carries one, together with the id of the writer that made it;
/// `(timestamp, writer)` orders all changes of a database totally, so clock skew between
/// processes cannot reorder writers. In JSON it is a string `"<millis>-<counter>"`, for
/// example `"1763703120123-0"`, which sorts correctly as a number pair.
public struct HLCTimestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970, at least the physical clock's reading when it was made.
    public var millis: Int64
    /// Orders readings made within the same millisecond.
    public var counter: UInt32

    /// Creates a reading.
    public init(millis: Int64, counter: UInt32 = 0) {
        self.millis = millis
        self.counter = counter
    }

    /// The smallest reading; earlier than any real one.
    public static let zero = HLCTimestamp(millis: 0, counter: 0)

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool {
        (lhs.millis, lhs.counter) < (rhs.millis, rhs.counter)
    }

    public var description: String { "\(millis)-\(counter)" }

    /// Parses the `"<millis>-<counter>"` form.
    public init?(_ text: some StringProtocol) {
        guard let dash = text.lastIndex(of: "-"), dash != text.startIndex,
              let millis = Int64(text[..<dash]),
              let counter = UInt32(text[text.index(after: dash)...])
        else { return nil }
        self.init(millis: millis, counter: counter)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = HLCTimestamp(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "not a clock reading: \(text)")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
