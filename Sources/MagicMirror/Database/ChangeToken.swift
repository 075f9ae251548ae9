/// A position in the history of one zone: the changes a reader has seen.
///
/// A token is a (``generation``, ``sequence``) pair. ``sequence`` counts committed changes
/// of the zone and only grows; ``generation`` grows whenever the database rewrote the zone
/// in a way that may have dropped history (for example compaction, which drops deleted
/// records' tombstones). Asking for the changes since a token of an older generation
/// therefore returns the whole zone, marked ``ChangeSet/isComplete``, and the reader drops
/// whatever it holds that the listing lacks.
///
/// Tokens belong to one zone of one database; compare them only with tokens of that zone.
public struct ChangeToken: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// How many times the zone's history was rewritten.
    public var generation: Int
    /// The number of the last change the token covers.
    public var sequence: Int

    /// Creates a token.
    public init(generation: Int, sequence: Int) {
        self.generation = generation
        self.sequence = sequence
    }

    /// The token of an empty zone that was never written.
    public static let initial = ChangeToken(generation: 0, sequence: 0)

    public static func < (lhs: ChangeToken, rhs: ChangeToken) -> Bool {
        (lhs.generation, lhs.sequence) < (rhs.generation, rhs.sequence)
    }

    public var description: String { "\(generation):\(sequence)" }
}
