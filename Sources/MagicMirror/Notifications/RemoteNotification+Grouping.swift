extension RemoteNotification {
    /// The notifications for the records one commit changed: at most one per reason
    /// (created for version 1, deleted for a tombstone, updated otherwise), in the order the
    /// reasons first appear.
    ///
    /// Every shipped database groups its notifications this way; an adapter calls it so
    /// that its subscribers hear the same as with the others (requirement 8 of
    /// ``RecordDatabase``).
    ///
    /// - Parameters:
    ///   - changed: The records as the commit stored them.
    ///   - databaseIdentifier: The database's ``RecordDatabase/identifier``.
    ///   - zone: The zone they belong to.
    ///   - token: The zone's token after the commit.
    ///   - writer: The writer that made the change, when known.
    /// - Returns: One notification per reason; none when `changed` is empty.
    public static func grouping(
        _ changed: [StoredRecord], databaseIdentifier: String, zone: ZoneID, token: ChangeToken,
        writer: String?
    ) -> [RemoteNotification] {
        var byReason: [Reason: [String]] = [:]
        var order: [Reason] = []
        for record in changed {
            let reason: Reason = record.isDeleted ? .deleted : (record.version == 1 ? .created : .updated)
            if byReason[reason] == nil { order.append(reason) }
            byReason[reason, default: []].append(record.id)
        }
        return order.map { reason in
            RemoteNotification(
                databaseIdentifier: databaseIdentifier, zone: zone, recordIDs: byReason[reason] ?? [],
                reason: reason, token: token, writer: writer)
        }
    }
}
