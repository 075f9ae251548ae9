/// A ``RecordDatabase`` that enforces the delete rules of ``Reference`` fields.
///
/// ``JSONFileDatabase`` is one, and so are `InMemoryDatabase` and `TemporaryDatabase` in
/// MirrorTesting. A ``Mirror``
/// whose record type declares ``Recordable/deleteRules`` registers them when it opens; on a
/// database that is not a `RelationshipDatabase`, opening such a mirror throws
/// ``MirrorError/Kind/unsupported``, rather than letting deletes ignore the rules.
///
/// ## Implementation requirements
///
/// 1. **Persisted rules.** ``registerDeleteRules(_:referringType:in:)`` stores the rules of a
///    referring type in the zone's scope space (the public scope, or one user's private
///    scope), replacing the type's earlier rules, durably; every writer of the database
///    enforces them from then on, also one that never opened the referring type.
/// 2. **Enforced in the commit.** A ``RecordDatabase/commit(_:to:)`` that deletes a record
///    of a rule's target type finds the live records of the referring types (in the same
///    scope space) whose rule field refers to it, and, as one atomic step with the delete:
///    deletes them (cascade, recursively), removes the reference from them (nullify), or
///    refuses the whole commit while one remains (deny) with ``MirrorError/Kind/refused``
///    whose ``MirrorError/recordIDs`` are the commit's denied records, marked
///    ``MirrorError/nothingStored``. A crash leaves all of it or none of it.
/// 3. **Hostile data.** A field that does not hold a well-formed reference is not a
///    reference: it is neither followed nor changed.
public protocol RelationshipDatabase: RecordDatabase {
    /// Stores the delete rules of `referringType` in the scope space of `zone`, replacing the
    /// type's earlier rules there.
    ///
    /// - Parameters:
    ///   - rules: The rules; each one's ``StoredDeleteRule/referringType`` is `referringType`.
    ///   - referringType: The record type that declares them.
    ///   - zone: A zone of the scope space (the referring type's zone).
    /// - Throws: ``MirrorError/Kind/invalidName`` or ``MirrorError/Kind/invalidRecord`` for a
    ///   rule that does not pass ``StoredDeleteRule/validate()``, or an I/O kind when they
    ///   cannot be stored.
    func registerDeleteRules(_ rules: [StoredDeleteRule], referringType: String, in zone: ZoneID) async throws
}
