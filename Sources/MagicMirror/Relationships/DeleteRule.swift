/// What deleting a record does to the records of `Record` that refer to it: delete them too
/// (cascade), remove the reference (nullify), or refuse the delete (deny).
///
/// Declare the rules on the referring type, naming the stored field (its coding key) and
/// the property's key path, whose type says how the field holds its references:
///
/// ```swift
/// struct Book: Recordable {
///     var id = UUID()
///     var title: String
///     var author: Reference<Author>
///     var editor: Reference<Author>?
///
///     static let deleteRules: [DeleteRule<Book>] = [
///         .cascade("author", \.author),     // deleting an author deletes their books
///         .nullify("editor", \.editor),     // deleting an editor empties the field
///     ]
/// }
/// ```
///
/// Nullify exists only for fields that can be empty (`Reference<Target>?` and
/// `[Reference<Target>]`): nullifying a `Reference<Target>` does not compile.
///
/// A ``Mirror`` of `Record` stores its type's rules in the database when it opens, and the
/// database enforces them in every commit that deletes a target, whichever process or
/// mirror deletes it, atomically with the delete (see <doc:Relationships>).
public struct DeleteRule<Record: Recordable>: Hashable, Sendable {
    /// The rule as the database stores it.
    public let stored: StoredDeleteRule

    private init<Target: Recordable>(
        _ field: String, _ target: Target.Type, _ cardinality: StoredDeleteRule.Cardinality,
        _ action: StoredDeleteRule.Action
    ) {
        stored = StoredDeleteRule(
            referringType: Record.recordType, field: field, cardinality: cardinality,
            targetType: Target.recordType, action: action)
    }

    /// Deleting the target deletes the record that refers to it, in the same commit.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the reference.
    /// - Returns: The rule.
    public static func cascade<Target>(_ field: String, _ keyPath: KeyPath<Record, Reference<Target>>) -> Self {
        Self(field, Target.self, .one, .cascade)
    }

    /// Deleting the target deletes the record that refers to it, in the same commit.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the reference.
    /// - Returns: The rule.
    public static func cascade<Target>(_ field: String, _ keyPath: KeyPath<Record, Reference<Target>?>) -> Self {
        Self(field, Target.self, .optional, .cascade)
    }

    /// Deleting any of the targets deletes the record that refers to them, in the same commit.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the references.
    /// - Returns: The rule.
    public static func cascade<Target>(_ field: String, _ keyPath: KeyPath<Record, [Reference<Target>]>) -> Self {
        Self(field, Target.self, .many, .cascade)
    }

    /// Deleting the target sets the field of the record that refers to it to `nil`, in the
    /// same commit.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the reference.
    /// - Returns: The rule.
    public static func nullify<Target>(_ field: String, _ keyPath: KeyPath<Record, Reference<Target>?>) -> Self {
        Self(field, Target.self, .optional, .nullify)
    }

    /// Deleting a target removes its reference from the field of the records that refer to
    /// it, in the same commit.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the references.
    /// - Returns: The rule.
    public static func nullify<Target>(_ field: String, _ keyPath: KeyPath<Record, [Reference<Target>]>) -> Self {
        Self(field, Target.self, .many, .nullify)
    }

    /// Deleting the target is refused (``MirrorError/Kind/refused``) while a record refers to
    /// it.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the reference.
    /// - Returns: The rule.
    public static func deny<Target>(_ field: String, _ keyPath: KeyPath<Record, Reference<Target>>) -> Self {
        Self(field, Target.self, .one, .deny)
    }

    /// Deleting the target is refused (``MirrorError/Kind/refused``) while a record refers to
    /// it.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the reference.
    /// - Returns: The rule.
    public static func deny<Target>(_ field: String, _ keyPath: KeyPath<Record, Reference<Target>?>) -> Self {
        Self(field, Target.self, .optional, .deny)
    }

    /// Deleting a target is refused (``MirrorError/Kind/refused``) while a record refers to
    /// it.
    ///
    /// - Parameters:
    ///   - field: The stored field (the coding key) of `keyPath`'s property.
    ///   - keyPath: The property that holds the references.
    /// - Returns: The rule.
    public static func deny<Target>(_ field: String, _ keyPath: KeyPath<Record, [Reference<Target>]>) -> Self {
        Self(field, Target.self, .many, .deny)
    }
}

extension Recordable {
    /// No delete rules: deleting a record this type refers to leaves the reference in place
    /// (a mirror reports it as dangling when it resolves it).
    public static var deleteRules: [DeleteRule<Self>] { [] }
}
