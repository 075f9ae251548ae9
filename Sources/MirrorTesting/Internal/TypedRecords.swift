import Foundation
import MagicMirror

/// Encodes and decodes `Recordable` values as stored fields, for the simulated writers
/// and the typed inspection of ``InMemoryDatabase``.
///
/// The bytes are exactly what a `Mirror` stores for a new record, and stored records are
/// read as a `Mirror` reads them (migrated from older schema versions): both use
/// MagicMirror's `SchemaCoder`.
enum TypedRecords {
    /// The fields of `record`.
    static func encode<Record: Recordable>(_ record: Record, scope: Scope) throws(MirrorError) -> Data {
        do {
            return try SchemaCoder<Record>().fields(for: record, over: nil)
        } catch {
            throw MirrorError(
                .encodingFailed, "record \(record.recordID) could not be encoded: \(error)",
                recordIDs: [record.recordID], recordType: Record.recordType, scope: scope, underlying: error)
        }
    }

    /// The record stored as `stored`.
    static func decode<Record: Recordable>(
        _ type: Record.Type, from stored: StoredRecord, scope: Scope
    ) throws(MirrorError) -> Record {
        guard let fields = stored.fields else {
            throw MirrorError(
                .notFound, "record \(stored.id) is deleted", recordIDs: [stored.id],
                recordType: Record.recordType, scope: scope)
        }
        do {
            return try SchemaCoder<Record>().decode(fields)
        } catch {
            throw MirrorError(
                .decodingFailed, "stored record \(stored.id) does not decode as \(Record.self): \(error)",
                recordIDs: [stored.id], recordType: Record.recordType, scope: scope,
                underlying: StoredRecordProblem.underlying(of: error))
        }
    }

    /// The zone of a record type in a scope, for the typed methods' `scope` and `user`.
    static func zone<Record: Recordable>(
        of type: Record.Type, scope: Scope, user: MirrorUser?
    ) throws(MirrorError) -> ZoneID {
        try ZoneID(Record.recordType, scope: scope, user: user?.name)
    }
}
