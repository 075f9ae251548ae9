/// A ``RecordDatabase`` whose users can share private records with other users.
///
/// The owner of a private record shares it with a named recipient, read-only or
/// read-write; the recipient reads it, with every other record shared with them, in the
/// zone ``ZoneID/shared(_:user:)-(_,MirrorUser)`` of their ``Scope/shared`` scope (a `Mirror` opened with
/// `scope: .shared`). Most code calls ``Mirror/share(_:with:access:)`` and
/// ``Mirror/revokeShare(of:from:)`` rather than these methods; see <doc:SharingRecords>.
///
/// ``JSONFileDatabase`` and MirrorTesting's `InMemoryDatabase` and `TemporaryDatabase` implement it (each process
/// enforces the shares: the library cooperates, file permissions decide what an
/// operating-system account can read); the PostgreSQL adapter's database enforces it on the
/// server, with row-level security.
///
/// ## Implementation requirements
///
/// 1. **Owners.** Only records of a ``Scope/private`` zone are shared, by its owner (the
///    zone's ``ZoneID/user``), with another user; anything else throws
///    ``MirrorError/Kind/unsupported`` (a zone of another scope) or
///    ``MirrorError/Kind/refused`` (the owner as recipient) and changes nothing.
/// 2. **Existing records.** Sharing a record that is not stored (never was, or deleted)
///    throws ``MirrorError/Kind/notFound`` naming it, and shares nothing of the call.
/// 3. **One record per id.** A recipient's shared zone shows at most one record per id:
///    sharing a record whose id another owner already shares with the same recipient (in
///    the same record type) throws ``MirrorError/Kind/refused`` and shares nothing.
/// 4. **One incarnation.** A share names the record as stored when it was shared: once
///    the owner deletes the record, the share shows nothing, even if a record with that id
///    is created again.
/// 5. **The shared zone.** ``RecordDatabase/fetchAll(in:)``, ``RecordDatabase/fetch(_:in:)``
///    and ``RecordDatabase/changes(in:since:)`` of `.shared(type, user: recipient)` return
///    exactly the stored records of that type shared with the recipient (their owners'
///    versions, clocks and writers), and nothing of any other record. Tokens grow with
///    every change to the shares or to the shared records; a change set may be complete
///    (``ChangeSet/isComplete``) for any token older than the current one.
/// 6. **Edits.** A commit to a shared zone applies saves of records shared read-write to
///    their owners' records, with the usual versions and conflicts. Anything else — an
///    edit of a record shared read-only, a deletion, a record not shared with the
///    recipient (a new one included) — throws ``MirrorError/Kind/refused`` naming those
///    records, with ``MirrorError/nothingStored`` set, and stores nothing of the commit.
///    (A commit whose saves belong to several owners is applied owner by owner.)
/// 7. **Revocation.** After ``revokeShares(of:in:from:)`` returns, the shared zone no longer
///    returns the records, and its subscribers are notified of the change.
/// 8. **Notifications.** A subscription to a shared zone is notified of every change to its
///    shares and to the shared records, by any writer, as it is for other zones.
public protocol SharingDatabase: RecordDatabase {
    /// Shares records of a private zone with a user.
    ///
    /// Sharing a record that is already shared with `recipient` changes its access.
    ///
    /// - Parameters:
    ///   - recordIDs: The ids of the records to share; they must be stored in `zone`.
    ///   - zone: The owner's private zone that holds them.
    ///   - recipient: The user to share them with.
    ///   - access: What the recipient may do with them.
    /// - Throws: ``MirrorError/Kind/notFound`` for a record that is not stored,
    ///   ``MirrorError/Kind/refused`` for the owner as recipient or an id that another owner
    ///   already shares with the recipient, ``MirrorError/Kind/unsupported`` for a zone that
    ///   is not private; nothing is shared then. What the store throws otherwise (for
    ///   example ``MirrorError/Kind/permissionDenied``).
    func share(
        _ recordIDs: [String], in zone: ZoneID, with recipient: MirrorUser, access: ShareAccess
    ) async throws

    /// Stops sharing records of a private zone with a user.
    ///
    /// Records that were not shared with `recipient` by the zone's owner are left alone, so
    /// revoking twice is harmless.
    ///
    /// - Parameters:
    ///   - recordIDs: The ids of the records to stop sharing.
    ///   - zone: The owner's private zone that holds them.
    ///   - recipient: The user to stop sharing them with.
    /// - Throws: ``MirrorError/Kind/unsupported`` for a zone that is not private; what the
    ///   store throws otherwise.
    func revokeShares(of recordIDs: [String], in zone: ZoneID, from recipient: MirrorUser) async throws

    /// The shares of a zone's records that are in effect (whose records are stored).
    ///
    /// - Parameter zone: A private zone (the shares its owner made, with every recipient),
    ///   or a shared zone (the records shared with its user, by every owner).
    /// - Returns: The shares, ordered by record id, then owner and recipient.
    /// - Throws: ``MirrorError/Kind/unsupported`` for a public zone; what the store throws
    ///   otherwise.
    func shares(in zone: ZoneID) async throws -> [RecordShare]
}
