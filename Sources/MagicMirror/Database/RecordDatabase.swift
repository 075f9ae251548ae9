import Foundation

/// A store of records, grouped in zones (one record type in one scope), that mirrors read,
/// commit to and subscribe to.
///
/// MagicMirror ships two implementations: ``JSONFileDatabase``, the embedded default, and
/// `InMemoryDatabase` in the `MirrorTesting` module. Adapters to other stores implement
/// this protocol too.
///
/// Records are untyped here: a ``StoredRecord`` holds its fields as the bytes of a JSON
/// object. `Mirror` encodes and decodes them as your ``Recordable`` type.
///
/// ## Implementation requirements
///
/// Every implementation must guarantee the following; the package's shared conformance
/// suite checks each point on every implementation it ships.
///
/// 1. **Names.** Before using a zone, validate it (``ZoneID/validate()``) and every record
///    id (the same rules: not empty, at most 255 bytes, no `/` or NUL, not `.` or `..`);
///    reject bad ones with ``MirrorError/Kind/invalidName`` and change nothing.
///    **Ids are bytes:** two ids are the same id only when their UTF-8 bytes are equal, not
///    when Swift's `String` says they are equal (canonical equivalence): `"e\u{301}"` and
///    `"\u{e9}"` are two records. Key records by bytes (PostgreSQL: the `C` collation;
///    Swift: not a `[String: …]` dictionary). Record types and user names, which may become
///    directory names, must be in Unicode Normalization Form C, which the validation checks.
/// 2. **Fields.** A save's fields must be a JSON object; reject anything else with
///    ``MirrorError/Kind/invalidRecord``. Stored fields are returned exactly as saved.
/// 3. **Versions.** A new record gets version 1; each save or delete of it adds one. A
///    deletion leaves a tombstone carrying the next version, which
///    ``changes(in:since:)`` reports until history is compacted.
///    **Creation clock:** a save that stores a record that did not exist (or was a
///    tombstone) sets ``StoredRecord/created`` to its ``RecordOperation/timestamp``;
///    later saves keep it, through compaction and reopening, whatever the writer.
/// 4. **Conflicts.** An operation conflicts when its ``RecordOperation/baseVersion``
///    differs from the stored version (0 when the record never existed). A tombstone
///    counts as the stored version: to re-create a deleted record, base the save on the
///    tombstone's version. A deletion of a record that never existed, based on 0, is
///    applied and leaves a tombstone of version 1.
///    **Idempotency:** an operation whose record is already stored with the same
///    ``RecordOperation/timestamp`` by the same ``writerID`` is a retry of a change that
///    was stored; it is reported `.applied` with the stored record and not stored twice.
/// 5. **Atomicity.** ``commit(_:to:)`` applies all of its operations or none: when any
///    operation conflicts, none is stored, the conflicting ones report `.conflict` with the
///    current record and the others `.notApplied`. A crash never leaves part of a commit
///    visible. Operations of one commit name distinct records.
/// 6. **Durability.** When ``commit(_:to:)`` returns, the change survives the process
///    being killed (and, for a durable database, the machine losing power).
/// 7. **Tokens.** Each applied commit moves the zone's token forward. ``changes(in:since:)``
///    returns, for a token of the current generation, the latest state of every record
///    changed after it (tombstones included); for a token of an older generation or from
///    the future, the complete zone with ``ChangeSet/isComplete`` set. Applying the change
///    set to what the reader had gives exactly ``fetchAll(in:)``.
/// 8. **Notifications.** Every applied commit, by this or any other writer, is delivered to
///    every live subscription of its zone, at least once, as one or more
///    ``RemoteNotification``s (at most one per reason) carrying the token after the
///    commit. Commits made through this instance are delivered before ``commit(_:to:)``
///    returns. Handlers run on an arbitrary thread and must not block.
/// 9. **Errors.** Everything thrown is a ``MirrorError``. A failed commit is not applied,
///    but where the database cannot know that (a connection lost while the server
///    committed, a flush that failed after other readers saw the bytes) it may turn out
///    stored; committing it again with the same timestamps is safe (idempotency, point 4).
///    Where the database knows it stored nothing (the commit was refused before anything
///    was written), the error says so with ``MirrorError/nothingStored``.
/// 10. **Threads.** Every method may be called from any thread or task, concurrently.
public protocol RecordDatabase: AnyObject, Sendable {
    /// A stable identifier of the database, the same in every process that opens it.
    var identifier: String { get }

    /// The id this instance writes its changes under, unique to this instance and process.
    var writerID: String { get }

    /// The one user whose private and shared zones this instance can reach, when the
    /// database decides it rather than the app (a PostgreSQL database: the role it connects
    /// as); `nil`, the default, when the app names any user (the JSON-file database).
    ///
    /// A private or shared ``Mirror`` opened without a `user:` belongs to this user when
    /// there is one, instead of following a ``UserSession``.
    var connectedUser: MirrorUser? { get }

    /// Commits a batch of operations on one zone, atomically.
    ///
    /// - Parameters:
    ///   - operations: The saves and deletes, at most one per record.
    ///   - zone: The zone they apply to.
    /// - Returns: The result of each operation and the zone's token afterwards.
    /// - Throws: A ``MirrorError`` when the commit could not be made, with
    ///   ``MirrorError/nothingStored`` set when the database knows it stored nothing.
    @discardableResult
    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome

    /// Every live record of a zone (no tombstones), with the token they reflect.
    ///
    /// - Returns: A change set with ``ChangeSet/isComplete`` set.
    func fetchAll(in zone: ZoneID) async throws -> ChangeSet

    /// The live records with the given ids; ids that do not exist or are deleted are left
    /// out.
    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord]

    /// The changes of a zone after `token`.
    ///
    /// See requirement 7 above for what an old-generation token returns.
    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet

    /// The zone's current token.
    func currentToken(in zone: ZoneID) async throws -> ChangeToken

    /// Calls `handler` for every commit to `zone`, by this or any other writer, until the
    /// returned subscription is cancelled or deallocated.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone.
    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable
}

extension RecordDatabase {
    /// `nil`: the app names the user of each private or shared mirror.
    public var connectedUser: MirrorUser? { nil }
}
