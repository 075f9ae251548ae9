import Foundation

/// One step that changes stored records from one schema version of a ``Recordable`` type to
/// the next, written against the stored JSON fields rather than against Swift types.
///
/// A type lists its migrations, oldest first, in ``Recordable/migrations``; its schema
/// version is the number of migrations plus one. Migration `n` (counting from 1) takes a
/// record of version `n` to version `n + 1`. Append new steps at the end; never reorder or
/// remove one, since stored records name the version they were written in.
///
/// ```swift
/// struct Todo: Recordable {
///     var id = UUID()
///     var title: String
///     var priority = 0
///     var dueDate: Date?
///
///     static let migrations: [RecordMigration] = [
///         .add("priority", default: 0),                 // version 1 → 2
///         .rename("due", to: "dueDate"),                // version 2 → 3
///     ]
/// }
/// ```
///
/// A mirror migrates each older record in memory as it loads it, and stores the migrated
/// form only when it saves the record, or when you call ``Mirror/migrateStoredRecords()``.
/// A migration that throws, or whose result does not decode, leaves the record untouched
/// and reports it once as ``MirrorError/Kind/decodingFailed``.
public struct RecordMigration: Sendable {
    let summary: String
    let body: @Sendable (inout RecordFields) throws -> Void

    private init(_ summary: String, _ body: @escaping @Sendable (inout RecordFields) throws -> Void) {
        self.summary = summary
        self.body = body
    }

    /// Adds a field with a default value to every record that does not have it.
    ///
    /// The one line a new non-optional field with a default value needs:
    ///
    /// ```swift
    /// var priority = 0
    /// static let migrations: [RecordMigration] = [.add("priority", default: 0)]
    /// ```
    ///
    /// - Parameters:
    ///   - name: The field's name, as the type encodes it (its coding key).
    ///   - value: The value older records get, encoded as a mirror encodes records.
    /// - Returns: The migration.
    public static func add<Value: Encodable & Sendable>(_ name: String, default value: Value) -> RecordMigration {
        // Encoded once, not once per record.
        let member = Result { try RecordFields.member(name, encoding: value) }
        return RecordMigration("add \(String(reflecting: name))") { fields in
            if !fields.contains(name) { fields.members[name] = try member.get() }
        }
    }

    /// Renames a field, keeping its stored value.
    ///
    /// - Parameters:
    ///   - name: The field's old name.
    ///   - newName: Its new name.
    /// - Returns: The migration.
    public static func rename(_ name: String, to newName: String) -> RecordMigration {
        RecordMigration("rename \(String(reflecting: name)) to \(String(reflecting: newName))") { fields in
            fields.rename(name, to: newName)
        }
    }

    /// Removes a field from every record.
    ///
    /// A field the type no longer declares is otherwise kept (so that older versions of
    /// the app still running do not lose it); drop it when it should go.
    ///
    /// - Parameter name: The field's name.
    /// - Returns: The migration.
    public static func drop(_ name: String) -> RecordMigration {
        RecordMigration("drop \(String(reflecting: name))") { fields in fields.remove(name) }
    }

    /// Changes the type of a field: decodes its stored value as `Old` and stores what
    /// `convert` returns. Records without the field are left alone.
    ///
    /// ```swift
    /// .convert("estimate", from: String.self) { Int($0) ?? 0 }
    /// ```
    ///
    /// - Parameters:
    ///   - name: The field's name.
    ///   - type: The type the field is stored as.
    ///   - convert: Returns the new value; may throw to reject a record.
    /// - Returns: The migration.
    public static func convert<Old: Decodable & Sendable, New: Encodable & Sendable>(
        _ name: String, from type: Old.Type, _ convert: @escaping @Sendable (Old) throws -> New
    ) -> RecordMigration {
        RecordMigration("convert \(String(reflecting: name)) from \(Old.self) to \(New.self)") { fields in
            guard let old = try fields.value(name, as: Old.self) else { return }
            try fields.set(name, to: try convert(old))
        }
    }

    /// Any other change to the stored fields: split or join fields, move values around.
    ///
    /// ```swift
    /// .transform { fields in
    ///     let first = try fields.value("first", as: String.self) ?? ""
    ///     let last = try fields.value("last", as: String.self) ?? ""
    ///     try fields.set("name", to: "\(first) \(last)")
    ///     fields.remove("first")
    ///     fields.remove("last")
    /// }
    /// ```
    ///
    /// - Parameter change: Changes the fields in place; may throw to reject a record. It
    ///   must give the same result every time for the same fields, since several processes
    ///   may migrate one record.
    /// - Returns: The migration.
    public static func transform(_ change: @escaping @Sendable (inout RecordFields) throws -> Void) -> RecordMigration {
        RecordMigration("transform", change)
    }
}
