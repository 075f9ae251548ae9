import Foundation
import Synchronization

/// Relationships: registering the record type's delete rules, and resolving references to
/// this mirror's records (see <doc:Relationships>).
extension Mirror {
    /// The current value of the record `reference` points to, or `nil` when it does not
    /// exist.
    ///
    /// A record shown in ``dataModel`` is returned from there, without waiting; one that is
    /// not (another process just created it and this mirror has not pulled it yet) is
    /// fetched from the database. A record this mirror removed and has not committed the
    /// removal of yet resolves to `nil`.
    ///
    /// A reference to a record that the database does not hold is *dangling*: a writer that
    /// did not know the referring type's ``DeleteRule``s deleted its target. It resolves to
    /// `nil` and is reported once per process: a ``MirrorError`` of kind
    /// ``MirrorError/Kind/notFound`` naming the missing record, posted as a `.mirrorError`
    /// notification and delivered on ``errors()`` and as ``lastError``.
    ///
    /// ```swift
    /// let authors = try await Mirror<Author>(database: database)
    /// if let author = try await authors.resolve(book.author) {
    ///     print(author.name)
    /// }
    /// ```
    ///
    /// - Parameter reference: A reference to a record of this mirror's type, in this
    ///   mirror's scope space.
    /// - Returns: The record's current value, or `nil`.
    /// - Throws: A ``MirrorError`` when the database cannot be read, or
    ///   ``MirrorError/Kind/decodingFailed`` when the stored record does not decode.
    public func resolve(_ reference: Reference<Record>) async throws -> Record? {
        try await resolve([reference]).first ?? nil
    }

    /// The current values of the records `references` point to, in order, `nil` for those
    /// that do not exist (see ``resolve(_:)-(Reference<Record>)``); for to-many relationships.
    ///
    /// Dangling references are reported once each, and only records not shown in
    /// ``dataModel`` are fetched, in one read.
    ///
    /// - Parameter references: References to records of this mirror's type.
    /// - Returns: One value or `nil` per reference.
    /// - Throws: A ``MirrorError`` when the database cannot be read or a stored record does
    ///   not decode.
    public func resolve(_ references: [Reference<Record>]) async throws -> [Record?] {
        let shown = dataModel
        var values = references.map { shown[recordID: $0.recordID] }
        let missing = references.indices.filter { values[$0] == nil }
        guard !missing.isEmpty else { return values }
        let removedHere = IDSet(pendingChanges.map(\.recordID))
        let fetchedIDs = missing.map { references[$0].recordID }.filter { !removedHere.contains($0) }
        let zone = self.zone
        var stored = IDMap<StoredRecord>()
        if !fetchedIDs.isEmpty {
            for record in try await database.fetch(fetchedIDs, in: zone) { stored[record.id] = record }
        }
        var dangling: [String] = []
        for index in missing {
            let id = references[index].recordID
            if removedHere.contains(id) { continue }
            guard let record = stored[id], let fields = record.fields else {
                dangling.append(id)
                continue
            }
            do {
                values[index] = try schema.decode(fields)
            } catch {
                throw MirrorError(
                    .decodingFailed, "stored record \(id) does not decode as \(Record.self): \(error)",
                    recordIDs: [id], recordType: zone.recordType, scope: zone.scope, underlying: error)
            }
        }
        reportDangling(dangling, in: zone)
        return values
    }

    /// Reports references to records that do not exist, once per record and process.
    private func reportDangling(_ ids: [String], in zone: ZoneID) {
        let fresh = reportedDanglingReferences.withLock { reported in
            ids.filter { reported.insert("\(database.identifier)|\(zone)|\($0)") }
        }
        guard !fresh.isEmpty else { return }
        let shown = fresh.prefix(3).joined(separator: ", ")
        let error = MirrorError(
            .notFound,
            "dangling reference: \(zone.recordType) \(shown)\(fresh.count > 3 ? ", …" : "") does not exist in "
                + "\(zone); a writer that does not know the delete rules deleted it. The referring "
                + "records are left as they are.",
            recordIDs: fresh, recordType: zone.recordType, scope: zone.scope)
        let effects = core.withLock { engine in
            engine.report(error)
            return engine.drain(owner: self)
        }
        deliver(effects)
    }

    /// Stores `Record`'s delete rules in the database's scope space of `zone`, when it
    /// declares any (called when a mirror opens).
    ///
    /// - Throws: ``MirrorError/Kind/unsupported`` when the database does not enforce delete
    ///   rules; what ``RelationshipDatabase/registerDeleteRules(_:referringType:in:)`` throws.
    static func registerDeleteRules(in database: any RecordDatabase, zone: ZoneID) async throws {
        let rules = Record.deleteRules.map(\.stored)
        guard !rules.isEmpty else { return }
        try DeleteRuleSet.check(rules, referringType: Record.recordType)
        guard let database = database as? any RelationshipDatabase else {
            throw MirrorError(
                .unsupported,
                "\(Record.self) declares delete rules, which \(type(of: database)) does not enforce; "
                    + "use a database that does (JSONFileDatabase, or MirrorTesting's InMemoryDatabase or TemporaryDatabase)",
                recordType: zone.recordType, scope: zone.scope)
        }
        try await database.registerDeleteRules(rules, referringType: Record.recordType, in: zone)
    }
}

/// The dangling references reported in this process (see `Mirror.resolve(_:)`).
private let reportedDanglingReferences = Mutex(OncePerKey<String>())
