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
    /// A reference to a record that the database does not hold resolves to `nil`: the target
    /// was never created in this mirror's zone (a wrong id, or a mirror of another scope than
    /// the record that holds the reference), is not committed yet (another writer is about
    /// to save it), or was deleted by a writer that did not apply the referring type's
    /// ``DeleteRule``s (the reference is *dangling*). It is reported once per process: a
    /// ``MirrorError`` of kind ``MirrorError/Kind/notFound`` naming the missing record and
    /// these causes, posted as a `.mirrorError` notification and delivered on ``errors()``
    /// and as ``lastError``.
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
        let one = fresh.count == 1
        let shown = fresh.prefix(3).joined(separator: ", ") + (fresh.count > 3 ? ", …" : "")
        let (it, was) = one ? ("it", "was") : ("them", "were")
        let error = MirrorError(
            .notFound,
            "\(one ? "a reference" : "references") to \(zone.recordType) \(shown) resolved to nil: \(zone) has no "
                + "\(one ? "record" : "records") \(shown). Either \(one ? "it" : "they") \(was) never created there "
                + "(check the id, and resolve with a mirror of the scope of the record that holds the reference), "
                + "\(one ? "is" : "are") not committed yet (another writer or an offline replica may still save "
                + "\(it): resolve again later), or \(was) deleted by a writer that does not apply the delete rules. "
                + "The records that refer to \(it) are left as they are: change or remove the reference, or give "
                + "the referring type a nullify or cascade delete rule",
            recordIDs: fresh, recordType: zone.recordType, scope: zone.scope)
        let effects = core.withLock { engine in
            engine.report(error)
            return engine.drain(owner: self)
        }
        deliver(effects)
    }

    /// Stores `Record`'s delete rules in the database's scope space of `zone` (called when a
    /// mirror opens), replacing those an earlier version of the type stored. A type without
    /// rules stores its empty set on a ``RelationshipDatabase``: that removes the rules of an
    /// earlier version that had some, so that removing the last rule from the type removes it
    /// from the database too.
    ///
    /// - Throws: ``MirrorError/Kind/unsupported`` when the type declares rules and the
    ///   database does not enforce them; what
    ///   ``RelationshipDatabase/registerDeleteRules(_:referringType:in:)`` throws.
    static func registerDeleteRules(in database: any RecordDatabase, zone: ZoneID) async throws {
        let rules = Record.deleteRules.map(\.stored)
        try DeleteRuleSet.check(rules, referringType: Record.recordType)
        guard let database = database as? any RelationshipDatabase else {
            guard !rules.isEmpty else { return }
            throw MirrorError(
                .unsupported,
                "\(Record.self) declares delete rules, which \(type(of: database)) does not enforce; "
                    + "use a database that does (JSONFileDatabase, or MirrorTesting's InMemoryDatabase or TemporaryDatabase)",
                recordType: zone.recordType, scope: zone.scope)
        }
        do {
            try await database.registerDeleteRules(rules, referringType: Record.recordType, in: zone)
        } catch let error as MirrorError where rules.isEmpty && (error.kind == .permissionDenied || error.kind == .readOnly) {
            // A writer that may not change the rules (a read-only role or directory) leaves
            // an earlier version's rules to the next writer that may, rather than not open:
            // it deletes nothing either.
        }
    }
}

/// The dangling references reported in this process (see `Mirror.resolve(_:)`).
private let reportedDanglingReferences = Mutex(OncePerKey<String>())
