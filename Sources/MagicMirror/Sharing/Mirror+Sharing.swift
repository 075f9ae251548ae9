extension Mirror {
    /// Shares a record of this private mirror with other users.
    ///
    /// Each user then sees the record, with every other record shared with them, in a
    /// mirror of the shared scope; with ``ShareAccess/readWrite`` their edits are committed
    /// to this record. Sharing a record already shared with a user changes its access.
    ///
    /// ```swift
    /// let mine = try await Mirror<Todo>(database: database, scope: .private, user: alice)
    /// mine.dataModel.append(Todo(title: "Plan the trip"))
    /// try await mine.share(mine.dataModel[0].recordID, with: [bob], access: .readWrite)
    ///
    /// // bob, in his process:
    /// let shared = try await Mirror<Todo>(database: database, scope: .shared, user: bob)
    /// ```
    ///
    /// A change of the record still waiting to be committed is committed first (the call
    /// waits for ``flush()``). A share names the record as stored now: once the owner
    /// deletes it, the share ends, even if a record with the same id is created again.
    ///
    /// - Parameters:
    ///   - recordID: The ``Recordable/recordID`` of the record to share.
    ///   - users: The users to share it with.
    ///   - access: What they may do with it; ``ShareAccess/readOnly`` by default.
    /// - Throws: ``MirrorError/Kind/unsupported`` outside a private mirror, for a sealed
    ///   mirror (``MirrorConfiguration/cipher``: recipients hold no key), or on a database
    ///   that does not share (not a ``SharingDatabase``); ``MirrorError/Kind/notFound`` when
    ///   the record is not stored; ``MirrorError/Kind/refused`` when a user is the owner, or
    ///   already has a record with this id shared by another owner. Users listed before the
    ///   one that failed keep their share.
    public func share(_ recordID: String, with users: [MirrorUser], access: ShareAccess = .readOnly) async throws {
        let (database, zone) = try sharingDatabase(toShare: true)
        if pendingChanges.contains(where: { IDKey.same($0.recordID, recordID) }) { try await flush() }
        for user in users {
            try await database.share([recordID], in: zone, with: user, access: access)
        }
    }

    /// Stops sharing a record of this private mirror with users.
    ///
    /// The record disappears from their shared mirrors, open ones included (for each, a
    /// removal, as if it had been deleted). Users it was not shared with are left alone.
    ///
    /// - Parameters:
    ///   - recordID: The ``Recordable/recordID`` of the shared record.
    ///   - users: The users to stop sharing it with.
    /// - Throws: ``MirrorError/Kind/unsupported`` outside a private mirror or on a database
    ///   that does not share; what the database throws otherwise.
    public func revokeShare(of recordID: String, from users: [MirrorUser]) async throws {
        let (database, zone) = try sharingDatabase(toShare: false)
        for user in users {
            try await database.revokeShares(of: [recordID], in: zone, from: user)
        }
    }

    /// The shares in effect: of a private mirror, every share of its records, with every
    /// user; of a shared mirror, the records shared with its user, by whom, with what
    /// access.
    ///
    /// - Returns: The shares, ordered by record id, then owner and recipient.
    /// - Throws: ``MirrorError/Kind/unsupported`` for a public mirror or on a database that
    ///   does not share; what the database throws otherwise.
    public func shares() async throws -> [RecordShare] {
        guard let database = database as? any SharingDatabase else { throw notSharing(zone) }
        return try await database.shares(in: zone)
    }

    /// The database and zone for sharing this mirror's records.
    private func sharingDatabase(toShare: Bool) throws -> (any SharingDatabase, ZoneID) {
        let zone = zone
        guard let database = database as? any SharingDatabase else { throw notSharing(zone) }
        guard zone.scope == .private else {
            throw MirrorError(
                .unsupported,
                "only a private mirror shares its records (with their owner's consent); this mirror is \(zone.scope)",
                recordType: Record.recordType, scope: zone.scope)
        }
        if toShare, schema.sealer != nil {
            throw MirrorError(
                .unsupported,
                "a sealed mirror's records cannot be shared: their recipients hold no key to open them (not yet)",
                recordType: Record.recordType, scope: zone.scope)
        }
        return (database, zone)
    }

    private func notSharing(_ zone: ZoneID) -> MirrorError {
        MirrorError(
            .unsupported, "the database \(type(of: database)) does not share records (it is no SharingDatabase)",
            recordType: Record.recordType, scope: zone.scope)
    }
}
