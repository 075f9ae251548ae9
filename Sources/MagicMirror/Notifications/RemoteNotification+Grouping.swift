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
        // The ids of each reason at the reason's place in `reasons` (no dictionary: a
        // `String`-backed enum hashes its raw value, twice per record of a large commit).
        let reasons: [Reason] = [.created, .updated, .deleted]
        var ids: [[String]] = [[], [], []]
        var order: [Int] = []
        for index in changed.indices {
            let place = changed[index].isDeleted ? 2 : (changed[index].version == 1 ? 0 : 1)
            if ids[place].isEmpty {
                order.append(place)
                // Room for the rest, so that a large commit's ids are not copied by doubling.
                ids[place].reserveCapacity(changed.count - index)
            }
            ids[place].append(changed[index].id)
        }
        return order.map { place in
            RemoteNotification(
                databaseIdentifier: databaseIdentifier, zone: zone, recordIDs: ids[place],
                reason: reasons[place], token: token, writer: writer)
        }
    }
}
