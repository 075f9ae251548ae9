/// A delete rule as a database stores and enforces it: which field of which record type
/// refers to which target type, and what deleting a target does to the records that refer
/// to it.
///
/// Declare rules with ``DeleteRule`` on the referring type; a ``Mirror`` hands them to its
/// database when it opens (``RelationshipDatabase/registerDeleteRules(_:referringType:in:)``).
/// You meet this type only when you implement a database.
public struct StoredDeleteRule: Hashable, Sendable, Codable, CustomStringConvertible {
    /// What deleting a target does to the records that refer to it.
    public enum Action: String, Hashable, Sendable, Codable {
        /// The referring records are deleted too, in the same commit (and, in turn, the
        /// records that refer to them by a cascade rule).
        case cascade
        /// The reference is removed: a to-one field becomes `null`, a to-many field loses the
        /// references to deleted records.
        case nullify
        /// The delete is refused (``MirrorError/Kind/refused``) while a record refers to the
        /// target.
        case deny
    }

    /// How the referring field holds its references.
    public enum Cardinality: String, Hashable, Sendable, Codable {
        /// One reference, never `null`.
        case one
        /// One reference or `null`.
        case optional
        /// An array of references.
        case many
    }

    /// The record type that holds the reference.
    public var referringType: String
    /// The stored field (the JSON key) of the referring type that holds the reference.
    public var field: String
    /// How the field holds its references.
    public var cardinality: Cardinality
    /// The record type referred to.
    public var targetType: String
    /// What deleting a target does.
    public var action: Action

    /// Creates a rule.
    ///
    /// - Parameters:
    ///   - referringType: The record type that holds the reference.
    ///   - field: The stored field that holds it.
    ///   - cardinality: How the field holds its references.
    ///   - targetType: The record type referred to.
    ///   - action: What deleting a target does.
    public init(
        referringType: String, field: String, cardinality: Cardinality, targetType: String, action: Action
    ) {
        self.referringType = referringType
        self.field = field
        self.cardinality = cardinality
        self.targetType = targetType
        self.action = action
    }

    public var description: String {
        "\(referringType).\(field) → \(targetType): \(action)"
    }

    /// Checks the rule: valid record types, a field name that is not empty, and no nullify
    /// of a field that cannot be `null`.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for a bad type or field name,
    ///   ``MirrorError/Kind/invalidRecord`` for a nullify rule on a non-optional to-one field.
    public func validate() throws(MirrorError) {
        try NameRules.check(referringType, as: "record type")
        try NameRules.check(targetType, as: "record type", recordType: referringType)
        guard !field.isEmpty, field.utf8.count <= NameRules.maximumBytes, !field.utf8.contains(0) else {
            throw MirrorError(
                .invalidName, "the delete rule \(self) names an invalid field: it must be 1 to "
                    + "\(NameRules.maximumBytes) bytes without NUL",
                recordType: referringType)
        }
        if action == .nullify, cardinality == .one {
            throw MirrorError(
                .invalidRecord,
                "the delete rule \(self) nullifies a field that cannot be null: declare the field "
                    + "Reference<\(targetType)>? or [Reference<\(targetType)>], or use cascade or deny",
                recordType: referringType)
        }
    }
}
