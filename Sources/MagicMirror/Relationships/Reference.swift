import Foundation

/// A typed pointer from one record to another record, of its own type or another: the
/// target's record type and id.
///
/// A to-one relationship is a `Reference<Target>` field (or `Reference<Target>?` when it may
/// be empty); a to-many relationship is a `[Reference<Target>]` field:
///
/// ```swift
/// struct Book: Recordable {
///     var id = UUID()
///     var title: String
///     var author: Reference<Author>
///     var editor: Reference<Author>?
///     var reviewers: [Reference<Author>] = []
/// }
/// let book = Book(title: "Dune", author: Reference(to: frank))
/// ```
///
/// A reference is stored as a JSON object, `{"recordType":"Author","recordID":"…"}`, so the
/// database can find the records that refer to a record it deletes and apply the referring
/// type's ``DeleteRule``s. Read the target's current value with
/// ``Mirror/resolve(_:)-(Reference<Record>)`` on a mirror of the target type.
///
/// References stay inside one scope space: a public record refers to public records, a
/// user's private record to the same user's private records (see <doc:Relationships>).
///
/// Decoding checks what another program may have written: a stored reference whose record
/// type is not `Target.recordType`, or whose id is not a valid record id, does not decode
/// (the record is reported with ``MirrorError/Kind/decodingFailed`` and left untouched).
public struct Reference<Target: Recordable>: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The id of the record referred to.
    public let recordID: String

    /// A reference to `target`.
    ///
    /// - Parameter target: The record to refer to.
    public init(to target: Target) {
        self.recordID = target.recordID
    }

    /// A reference to the record of `Target` with the id `recordID`.
    ///
    /// - Parameter recordID: The target's ``Recordable/recordID``.
    public init(recordID: String) {
        self.recordID = recordID
    }

    /// The record type referred to: `Target.recordType`.
    public var recordType: String { Target.recordType }

    public var description: String { "\(Target.recordType)/\(recordID)" }

    /// Two references are equal when their ids have the same UTF-8 bytes (ids are bytes,
    /// see ``Recordable``).
    public static func == (lhs: Reference, rhs: Reference) -> Bool {
        lhs.recordID.utf8.elementsEqual(rhs.recordID.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(recordID.utf8.count)
        for byte in recordID.utf8 { hasher.combine(byte) }
    }

    private enum CodingKeys: String, CodingKey {
        case recordType, recordID
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let recordType = try container.decode(String.self, forKey: .recordType)
        guard recordType.utf8.elementsEqual(Target.recordType.utf8) else {
            let shown = recordType.utf8.count > 40 ? String(recordType.prefix(40)) + "…" : recordType
            throw DecodingError.dataCorruptedError(
                forKey: .recordType, in: container,
                debugDescription: "a Reference<\(Target.recordType)> refers to a record of type "
                    + "\(String(reflecting: shown)), not \(Target.recordType)")
        }
        let recordID = try container.decode(String.self, forKey: .recordID)
        if let problem = NameRules.problem(with: recordID) {
            throw DecodingError.dataCorruptedError(
                forKey: .recordID, in: container,
                debugDescription: "a Reference<\(Target.recordType)> holds an invalid record id: it \(problem)")
        }
        self.recordID = recordID
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Target.recordType, forKey: .recordType)
        try container.encode(recordID, forKey: .recordID)
    }
}
