import Foundation

/// Turns stored fields of any schema version into `Record`, and `Record` into the fields to
/// store, keeping what the type does not know.
///
/// Every stored record a mirror decodes, and every record it saves, goes through here:
///
/// - **Reading**: a record stored in an older schema version (the `"$schemaVersion"` field,
///   1 when absent) is migrated in memory by the type's ``Recordable/migrations`` before it
///   is decoded. A record from a newer version is decoded as it is.
/// - **Writing**: the fields the type encodes, plus every stored field it does not know
///   (written by a newer version of the app, or left by a migration), and the schema
///   version: the type's own, or the stored record's when that is newer. A record is never
///   stored with less than it had.
///
/// Whether a stored field missing from the encoded value is unknown to the type or was
/// cleared (an optional set to `nil`) is told by decoding the stored record and encoding it
/// again: the fields that come back are the ones the type knows. That costs one decode and
/// encode per save, and only when the encoded value lacks some stored field.
package struct SchemaCoder<Record: Recordable>: Sendable {
    package static var versionKey: String { SchemaVersionField.key }

    let migrations: [RecordMigration]
    let encoder: JSONEncoder
    /// Whether ``DirectJSONEncoder`` stands in for `encoder` (it gives the same bytes).
    let encodesDirectly: Bool
    let decoder: JSONDecoder
    /// Seals and opens stored fields; `nil` when they are stored open (see SchemaCoder+Sealing).
    let sealer: FieldSealer?

    package init(cipher: (any RecordCipher)? = nil) {
        migrations = Record.migrations
        encoder = StoredFieldsFormat.makeEncoder()
        encodesDirectly = DirectJSONEncoder.canStandIn(for: encoder)
        decoder = StoredFieldsFormat.makeDecoder()
        sealer = cipher.map(FieldSealer.init)
    }

    /// The type's schema version: its number of migrations plus one.
    package var currentVersion: Int { migrations.count + 1 }

    // MARK: Reading

    /// Decodes stored fields, migrating them first when they are older than the type.
    ///
    /// - Throws: A ``StoredRecordProblem`` naming the field and the versions.
    package func decode(_ fields: Data) throws -> Record {
        let current = try migrate(fields)
        do {
            return try decoder.decode(Record.self, from: current)
        } catch {
            throw problem(error, storedVersion: storedVersion(of: fields))
        }
    }

    /// Decodes the fields of every record: element `i` belongs to the `i`th record, `nil` for
    /// a tombstone. Failures are ``StoredRecordProblem``s.
    package func decodeInOrder(_ records: some Collection<StoredRecord>) -> [Result<Record, any Error>?] {
        decodeAll(records).results
    }

    /// Decodes the fields of every record, packed: position `i` is the `i`th record, missing
    /// for a tombstone or with the ``StoredRecordProblem`` its fields gave.
    package func decodeAll(_ records: some Collection<StoredRecord>) -> DecodedRecords<Record> {
        var migrationFailures: [Int: any Error] = [:]
        var prepared: [StoredRecord] = []
        let prepares = !migrations.isEmpty || sealer != nil
        if prepares {
            // Migrated and opened in parallel parts, like the decoding after it.
            let stored = Array(records)
            let migrated = BatchJSONCoding.inParallelParts(stored.count, state: {}) { _, index in
                stored[index].fields.map { fields in Result { try migrate(fields) } }
            }
            prepared = stored
            for index in prepared.indices {
                switch migrated[index] {
                case .success(let fields)?: prepared[index].fields = fields
                case .failure(let error)?:
                    // Missing from the decoding, as a tombstone is; its error is set below.
                    migrationFailures[index] = error
                    prepared[index].fields = nil
                case nil: break
                }
            }
        }
        var decoded = !prepares
            ? BatchJSONCoding.decodeAll(records, as: Record.self, with: decoder)
            : BatchJSONCoding.decodeAll(prepared, as: Record.self, with: decoder)
        // Only the missing positions are looked at: a large zone opens with none but its
        // tombstones.
        guard !decoded.missing.isEmpty else { return decoded }
        var stored: [StoredRecord]?
        for index in decoded.missing.indices {
            let position = decoded.missing[index].position
            if let failure = migrationFailures[position] {
                decoded.missing[index].error = failure
            } else if let error = decoded.missing[index].error {
                stored = stored ?? Array(records)
                decoded.missing[index].error = storedProblem(error, fields: stored![position].fields)
            }
        }
        return decoded
    }

    /// What a stored record's fields that did not decode are reported as.
    private func storedProblem(_ error: any Error, fields: Data?) -> any Error {
        if let sealed = fields.flatMap(sealedProblem) { return sealed }
        return problem(error, storedVersion: fields.map(storedVersion(of:)) ?? 1)
    }

    /// Decodes the fields of every live record in `records`, by record id.
    package func decode(_ records: some Collection<StoredRecord>) -> IDMap<Result<Record, any Error>> {
        var results = IDMap<Result<Record, any Error>>()
        results.reserveCapacity(records.count)
        for (record, result) in zip(records, decodeInOrder(records)) {
            if let result { results[record.id] = result }
        }
        return results
    }

    /// The stored fields, opened when sealed, in the type's schema version: migrated when
    /// older, as they are otherwise (the same bytes).
    ///
    /// - Throws: A ``StoredRecordProblem`` when they cannot be opened or a migration throws.
    package func migrate(_ fields: Data) throws -> Data {
        let fields = try opened(fields)
        guard !migrations.isEmpty else { return fields }
        let version = storedVersion(of: fields)
        guard version < currentVersion else { return fields }
        guard var object = RecordFields(json: fields) else {
            throw StoredRecordProblem(
                field: nil, storedVersion: version, currentVersion: currentVersion, recordType: "\(Record.self)",
                migration: nil, reason: "the stored fields are not a JSON object", underlying: nil)
        }
        object.remove(Self.versionKey)
        for step in max(version, 1)..<currentVersion {
            let migration = migrations[step - 1]
            do {
                try migration.body(&object)
            } catch {
                throw StoredRecordProblem(
                    field: nil, storedVersion: version, currentVersion: currentVersion,
                    recordType: "\(Record.self)", migration: (step, migration.summary),
                    reason: "\(error)", underlying: error)
            }
            object.remove(Self.versionKey)
        }
        object.members[Self.versionKey] = JSONFieldMerge.Member(
            keyToken: SchemaVersionField.keyToken, value: Data("\(currentVersion)".utf8))
        return object.json
    }

    /// The schema version stored fields were written in: their `"$schemaVersion"` field, 1
    /// when there is none (records written before the type had migrations).
    package func storedVersion(of fields: Data) -> Int {
        SchemaVersionField.version(of: fields)
    }

    // MARK: Writing

    /// The fields to store for `value`, saved over the stored fields `stored` (`nil` for a
    /// new record): its encoding, plus the stored fields the type does not know.
    ///
    /// - Throws: The encoder's error when `value` cannot be encoded.
    package func fields(for value: Record, over stored: Data?) throws -> Data {
        try fields(encoded: encode(value), over: stored)
    }

    /// ``fields(for:over:)`` of a value already encoded with ``encoder`` (a batch's values
    /// are encoded together by ``BatchJSONCoding``).
    ///
    /// - Throws: When `stored` cannot be opened.
    package func fields(encoded written: Data, over stored: Data?) throws -> Data {
        fields(written, over: try stored.map(openedBase))
    }

    /// `value`'s own fields: its encoding, by ``DirectJSONEncoder`` unless it declines.
    private func encode(_ value: Record) throws -> Data {
        try DirectJSONEncoder.encode(value, direct: encodesDirectly, orWith: encoder)
    }

    /// `written` (fields the type encoded, or a merge of them) completed with the fields of
    /// `stored` the type does not know, and stamped with the schema version.
    package func fields(_ written: Data, over stored: Data?) -> Data {
        guard let stored else { return stamped(written) }
        // The common case: a type without migrations saving every field it read.
        if currentVersion == 1, StoredKeys.areCovered(stored, by: written) { return written }
        let storedForm = (try? migrate(stored)) ?? stored
        guard let storedMembers = JSONFieldMerge.members(of: storedForm),
              var members = JSONFieldMerge.members(of: written)
        else { return stamped(written) }
        var missing = storedMembers.keys.filter { members[$0] == nil && $0 != Self.versionKey }
        let version = max(currentVersion, SchemaVersionField.version(in: storedMembers) ?? 1)
        if missing.isEmpty, version == 1, members[Self.versionKey] == nil { return written }
        if !missing.isEmpty, let known = knownFields(storedForm) {
            missing.removeAll { known.contains($0) }
        }
        for key in missing { members[key] = storedMembers[key] }
        if version > 1 {
            members[Self.versionKey] = JSONFieldMerge.Member(
                keyToken: SchemaVersionField.keyToken, value: Data("\(version)".utf8))
        } else {
            members[Self.versionKey] = nil
        }
        return JSONFieldMerge.object(members)
    }

    /// The fields the type knows among `fields`: those that come back when they are decoded
    /// and encoded again. `nil` when they do not decode (then none is taken for known).
    private func knownFields(_ fields: Data) -> Set<String>? {
        guard let value = try? decoder.decode(Record.self, from: fields),
              let encoded = try? encode(value),
              let members = JSONFieldMerge.members(of: encoded)
        else { return nil }
        return Set(members.keys)
    }

    /// `written` with the type's schema version, when it is above 1.
    private func stamped(_ written: Data) -> Data {
        guard currentVersion > 1 else { return written }
        guard var members = JSONFieldMerge.members(of: written) else { return written }
        members[Self.versionKey] = JSONFieldMerge.Member(
            keyToken: SchemaVersionField.keyToken, value: Data("\(currentVersion)".utf8))
        return JSONFieldMerge.object(members)
    }

    // MARK: Errors

    /// A decoding error, told as the field it is about and the versions involved.
    private func problem(_ error: any Error, storedVersion: Int) -> StoredRecordProblem {
        if let problem = error as? StoredRecordProblem { return problem }
        var field: String?
        var reason = "\(error)"
        if let decodingError = error as? DecodingError {
            let path: [any CodingKey]
            switch decodingError {
            case .keyNotFound(let key, let context):
                path = context.codingPath + [key]
                reason = "is missing"
            case .typeMismatch(let type, let context):
                path = context.codingPath
                reason = "is not a \(type): \(context.debugDescription)"
            case .valueNotFound(let type, let context):
                path = context.codingPath
                reason = "is null where a \(type) is expected"
            case .dataCorrupted(let context):
                path = context.codingPath
                reason = "is invalid: \(context.debugDescription)"
            @unknown default:
                path = []
            }
            if !path.isEmpty {
                field = path.map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
                    .joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
            }
        }
        return StoredRecordProblem(
            field: field, storedVersion: storedVersion, currentVersion: currentVersion,
            recordType: "\(Record.self)", migration: nil, reason: reason, underlying: error)
    }
}

/// The `"$schemaVersion"` field of stored records, found without parsing the whole record
/// when it can be.
enum SchemaVersionField {
    /// The stored field holding a record's schema version; absent means version 1.
    static let key = "$schemaVersion"

    /// The schema version stored fields were written in: their `"$schemaVersion"` field, 1
    /// when there is none (records written before the type had migrations).
    static func version(of fields: Data) -> Int {
        fields.withUnsafeBytes { raw -> Int? in
            let bytes = raw.bindMemory(to: UInt8.self)
            // Encoded with sorted keys, the field comes first: read it in place.
            if let version = leadingVersion(bytes) { return version }
            guard contains(quotedKey, in: bytes) else { return 1 }
            return nil
        } ?? (JSONFieldMerge.members(of: fields).flatMap { version(in: $0) } ?? 1)
    }


    private static let quotedKey = Array("\"\(key)\"".utf8)
    static let keyToken = Data(quotedKey)
    private static let leadingKey = Array("{\"\(key)\":".utf8)

    /// The version of a record whose first bytes are `{"$schemaVersion":<digits>`.
    private static func leadingVersion(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count > leadingKey.count, bytes.starts(with: leadingKey) else { return nil }
        var value = 0
        var index = leadingKey.count
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]), value < 1 << 40 {
            value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        guard index > leadingKey.count, index < bytes.count,
              bytes[index] == UInt8(ascii: ",") || bytes[index] == UInt8(ascii: "}")
        else { return nil }
        return value
    }

    private static func contains(_ needle: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = needle.first, bytes.count >= needle.count else { return false }
        var index = 0
        while index <= bytes.count - needle.count {
            if bytes[index] == first, needle.indices.allSatisfy({ bytes[index + $0] == needle[$0] }) { return true }
            index += 1
        }
        return false
    }

    /// The schema version among decoded top-level members, if they have one.
    static func version(in members: [String: JSONFieldMerge.Member]) -> Int? {
        guard let member = members[key] else { return nil }
        return Int(String(decoding: member.value, as: UTF8.self).trimmingCharacters(in: .whitespaces))
    }
}

/// Why a stored record does not decode as its record type: the field, the schema version it
/// was stored in and the type's, or the migration that failed.
package struct StoredRecordProblem: Error, CustomStringConvertible {
    /// The field (a path for nested values, like `address.city` or `tags[2]`), if known.
    package var field: String?
    package var storedVersion: Int
    package var currentVersion: Int
    package var recordType: String
    /// The migration that threw: its number and summary.
    package var migration: (number: Int, summary: String)?
    package var reason: String
    package var underlying: (any Error)?

    /// The error behind `error`: the decoding or migration error a problem wraps, or
    /// `error` itself.
    package static func underlying(of error: any Error) -> any Error {
        (error as? StoredRecordProblem)?.underlying ?? error
    }

    package var description: String {
        let versions = storedVersion > currentVersion
            ? "stored by schema version \(storedVersion), newer than \(recordType)'s \(currentVersion)"
            : storedVersion < currentVersion
            ? "stored in schema version \(storedVersion); \(recordType) is at \(currentVersion)"
            : "stored in \(recordType)'s current schema version, \(currentVersion)"
        if migration == nil, let field, reason == "is missing", storedVersion == currentVersion,
           !field.contains("."), !field.contains("[") {
            // The usual cause: a field added to the type without a migration.
            return "field \(String(reflecting: field)) is missing (\(versions)): a field added to \(recordType) "
                + "needs a default for the records stored before, a migration such as "
                + ".add(\(String(reflecting: field)), default: …) in \(recordType).migrations"
        }
        if let migration {
            return "migration \(migration.number) (\(migration.summary), schema version \(migration.number) to "
                + "\(migration.number + 1)) failed: \(reason) (\(versions))"
        }
        if let field { return "field \(String(reflecting: field)) \(reason) (\(versions))" }
        return "\(reason) (\(versions))"
    }
}
