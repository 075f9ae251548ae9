import Foundation

// A mirror with a cipher (MirrorConfiguration.cipher): which mirrors may have one, and
// conflicts settled on open fields.

extension Mirror {
    /// The schema coder of a mirror of `scope` opened for `user`, with the configuration's
    /// cipher.
    ///
    /// - Throws: ``MirrorError/Kind/unsupported`` for a cipher in the public scope (whose
    ///   records every user reads), or in a private mirror that follows a ``UserSession``
    ///   (whose next user's records would be sealed with this user's keys).
    static func schemaCoder(scope: Scope, user: MirrorUser?, configuration: MirrorConfiguration) throws -> SchemaCoder<Record> {
        guard let cipher = configuration.cipher else { return SchemaCoder() }
        guard scope == .private else {
            throw MirrorError(
                .unsupported,
                "a cipher seals private records only: public records are read by every user of the database. "
                    + "Open the mirror in the private scope, or without MirrorConfiguration.cipher",
                recordType: Record.recordType, scope: scope)
        }
        guard user != nil else {
            throw MirrorError(
                .unsupported,
                "a cipher holds the keys of one user: name that user (Mirror(database:scope:user:...)) rather than "
                    + "following a UserSession, whose next user's records would be sealed with these keys",
                recordType: Record.recordType, scope: scope)
        }
        return SchemaCoder(cipher: cipher)
    }

    /// Decides what to do with a local change whose commit conflicted, as
    /// ``resolveOpened(_:policy:writerID:in:)`` decides on open fields, and seals what it saves.
    ///
    /// A stored side the cipher cannot open (sealed with another key) holds the change:
    /// nothing is merged with it and nothing overwrites it.
    func resolve(
        _ conflict: SyncEngine<Record>.Conflict, policy: ConflictPolicy<Record>, writerID: String, in zone: ZoneID
    ) -> Resolution {
        guard schema.sealer != nil else { return resolveOpened(conflict, policy: policy, writerID: writerID, in: zone) }
        var opened = conflict
        do {
            opened.current?.fields = try conflict.current?.fields.map(schema.opened)
            opened.entry.base?.fields = try conflict.entry.base?.fields.map(schema.opened)
            opened.entry.resolvedFields = try conflict.entry.resolvedFields.map(schema.opened)
        } catch {
            let version = conflict.current.map { " (version \($0.version))" } ?? ""
            return .hold(MirrorError(
                .decodingFailed,
                "the local change of record \(conflict.entry.recordID) conflicts with the stored record\(version), "
                    + "which cannot be opened: \(error); the change stays pending and the stored record is left "
                    + "untouched",
                recordIDs: [conflict.entry.recordID], recordType: zone.recordType, scope: zone.scope,
                underlying: StoredRecordProblem.underlying(of: error)))
        }
        switch resolveOpened(opened, policy: policy, writerID: writerID, in: zone) {
        case .save(let fields, let value, _):
            do {
                return .save(fields: try schema.sealed(fields), value: value, base: conflict.current)
            } catch {
                return .hold(encodingError(conflict.entry.recordID, error, in: zone))
            }
        case .delete:
            return .delete(base: conflict.current)
        case .keepStored(_, let decoded, let problem):
            return .keepStored(conflict.current, decoded: decoded, problem: problem)
        case .hold(let error):
            return .hold(error)
        }
    }
}
