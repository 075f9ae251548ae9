/// The checks every ``RecordDatabase`` makes before it commits, for adapters in other
/// packages.
extension RecordOperation {
    /// Checks a commit's zone and operations against requirements 1, 2 and 5 of
    /// ``RecordDatabase``: valid zone and record-id names, distinct record ids, and fields
    /// that are one JSON object.
    ///
    /// Call it first in ``RecordDatabase/commit(_:to:)``, so that a bad commit changes
    /// nothing and fails with the same error as in every other database:
    ///
    /// ```swift
    /// func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
    ///     try RecordOperation.validate(operations, in: zone)
    ///     // …
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - operations: The operations of one commit.
    ///   - zone: The zone they are committed to.
    /// - Throws: ``MirrorError/Kind/invalidName`` for a bad record type, user name or
    ///   record id; ``MirrorError/Kind/invalidRecord`` for a record named twice or fields
    ///   that are not one JSON object.
    public static func validate(_ operations: [RecordOperation], in zone: ZoneID) throws(MirrorError) {
        try ZoneState.validate(operations, zone: zone)
    }
}
