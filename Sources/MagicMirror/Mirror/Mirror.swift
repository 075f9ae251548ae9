import Foundation
import Observation
import Synchronization

/// An in-memory array of records that stays in sync with a database.
///
/// A mirror holds every stored record of one ``Recordable`` type in one scope, in
/// ``dataModel``. Read it from any thread; mutate it like an array. Each mutation is applied
/// to the array at once and committed to the database in the background, in order and in
/// batches. Changes made by other mirrors, processes or writers of the database arrive by
/// themselves.
///
/// ```swift
/// struct Todo: Recordable {
///     var id = UUID()
///     var title: String
///     var done = false
/// }
///
/// let mirror = try await Mirror<Todo>(database: database)
/// mirror.dataModel.append(Todo(title: "Milk"))
/// mirror.dataModel[0].done = true
/// try await mirror.flush()          // both changes are durable now
/// ```
///
/// ## Loading
///
/// The initializer loads: when it returns, ``dataModel`` holds every stored record of the
/// zone that decodes as `Record`, in creation order. Records stored by an older version of
/// the type are migrated in memory first (``Recordable/migrations``). Records that still do
/// not decode are skipped, listed in ``skippedRecords``, reported once each as
/// ``MirrorError/Kind/decodingFailed`` and left untouched in the database; or opening
/// throws, with ``UndecodableRecordPolicy/fail`` (see "Records that do not decode" in
/// ``Recordable``). A save keeps the stored fields `Record` does not know;
/// see <doc:ChangingYourRecordTypes>.
///
/// ## Order
///
/// Creation order is the order of the records' ``StoredRecord/created`` clocks (the first
/// save of each), then of their ids' bytes: every process and every reopen agree on it.
/// A record you append lands at the end, which is its place in creation order (its commit
/// carries a later clock than every record the mirror knows); a record added by another
/// writer is inserted at its place. Reordering ``dataModel`` (`move`, `sort`, `swapAt`,
/// `insert(_:at:)`) stays local: it is not stored, other processes do not see it, and a
/// reopened mirror is in creation order again. For an order of your own that every
/// process shares, sort a ``LiveView`` by a field of the record and move records with
/// ``LiveView/move(from:to:orderKey:)`` (see <doc:LiveQueries>).
///
/// ## Committing
///
/// `append`, `insert`, `dataModel[i].field = x`, `remove(at:)`, `removeLast()`,
/// `removeAll()`, `sort()` and assigning a whole array all work. A mutation that changes a
/// record (even only one of its fields) becomes a save; one that removes a record becomes a
/// delete; one that only reorders records changes nothing in the database. Several changes
/// to one record made before it is committed are committed as one, and a record created
/// and deleted before it is committed is never stored. The cost of a mutation of one
/// element does not depend on the number of records; assigning a whole array costs time in
/// proportion to its length.
///
/// Records are stored as JSON objects, encoded with `JSONEncoder` (sorted keys, default
/// strategies: dates as seconds since 2001, data as Base64), so that they decode back to
/// equal values.
///
/// A change that cannot be committed stays pending (``pendingChanges``) and is never dropped
/// while the process runs. A transient failure (see ``MirrorError/Kind/isTransient``) is
/// retried with exponential backoff (``MirrorConfiguration``); any other failure puts the
/// change on hold until the record changes again or ``flush()`` is called. A change the
/// database refuses by a rule of its own (``MirrorError/Kind/refused``: a delete a
/// relationship denies, an edit of a record shared read-only) is dropped instead: the record
/// shows as stored again. Every failure is reported once: as a `Notification` named `.mirrorError` whose `object` is the
/// ``MirrorError``, on ``errors()``, and as ``lastError``.
///
/// ## Conflicts
///
/// Each commit says which stored version its change was based on. When another writer
/// changed the record since, ``conflictPolicy`` settles it (``ConflictPolicy/changedKeys`` by
/// default: a three-way merge by field) and the result is committed. A delete wins over a
/// concurrent edit. While a local change is pending, ``dataModel`` shows the local value,
/// even when another writer changed the record meanwhile.
///
/// ## Several mirrors
///
/// Mirrors of one record type and scope on one database, in one process, share one
/// subscription to the database and see each other's commits as soon as they are applied,
/// each change exactly once. Other processes' commits arrive through that subscription too:
/// the database tells it of each new change token, and it wakes each mirror once to pull the
/// changes since the mirror's own token, so a notification that is lost, repeated or late
/// leaves the array right. The library's own sync does not go through `NotificationCenter`;
/// the notifications posted there (and ``MirrorNotificationRouting``'s converter) are for
/// your code, and for payloads your app receives from elsewhere.
///
/// ## Users
///
/// A private mirror opened without a `user:` on a database that connects as one user (see
/// ``RecordDatabase/connectedUser``: a PostgreSQL database's role) holds that user's private
/// zone. On any other database it holds the private zone of the current user of
/// a ``UserSession`` (``MirrorConfiguration/userSession``, ``UserSession/shared`` by
/// default) and follows it. When the session switches users, the mirror moves to the new
/// user's zone at once: every record of the old user is removed from ``dataModel`` (each a
/// committed ``MirrorChange/Kind/removed`` change), and the new user's records are inserted
/// as they load; changes made from then on belong to the new user. The old user's changes
/// that were not committed yet are still committed to the old user's zone, never the new
/// one; ``flush()`` waits for them too, but ``pendingChanges`` lists only the current
/// user's. A mirror of the shared scope (the records other users shared with its user, see
/// <doc:SharingRecords>) follows the session the same way.
///
/// ## Observing
///
/// - ``changes()``: an `AsyncSequence` of ``MirrorChange``s (inserted, updated or removed;
///   local or remote; pending or committed).
/// - The Observation framework: `Mirror` is `Observable`; reading ``dataModel`` inside
///   `withObservationTracking` (or a SwiftUI view) tracks it.
/// - ``observe(_:)``: a closure called with the current records at once, then with a
///   snapshot whenever they have changed (coalesced; never when nothing changed).
/// - ``observeOnMainActor(_:)``: the same, every call on the main actor, for UI code (see
///   <doc:ApplePlatforms>, which also says where every other callback runs).
///
/// > Important: A mirror stops its work when it is deallocated: its subscription, its
/// > observers and its background task end. While changes wait to be committed, its
/// > background task keeps it alive until they are; call ``flush()`` to know when.
///
/// > Important: `Mirror` hides the standard library's `Mirror` in files that import
/// > MagicMirror; write `Swift.Mirror(reflecting:)` there.
public final class Mirror<Record: Recordable>: Sendable {
    // How a mirror works inside (read this before changing it)
    //
    // A mirror is its sync engine (Sync/SyncEngine.swift, a value type) behind one lock,
    // two background tasks, and its place in the zone's shared subscription.
    //
    // Mutable state and what guards it:
    //
    // - `core` (MirrorLock: a recursive lock) guards the engine — the records shown, the
    //   commit queue, what the mirror knows of the database, the waiting flushes, the
    //   streams and observers, the last error, the live views, the mirror's membership of
    //   its zone's shared subscription, its background tasks, and whether it holds itself —
    //   and the records lent out during a mutation of `dataModel`. Held for short sections
    //   that never block and never take another mirror's lock; across the `yield` of
    //   `dataModel`'s `_modify` (the caller's mutation, which may read the engine's other
    //   state on the same thread: the lock is recursive); and across records' `==` where the
    //   engine compares a record with the one shown (the only other user code run under it).
    // - `commitWakeup` and `pullWakeup` (Wakeup, a Mutex each) wake the two background
    //   tasks. Signalled with or without `core` held; they take no other lock.
    // - `account` (MirrorAccountLink): `switching`, held while a user switch is applied, and
    //   `state` (the session observer and the mirrors finishing earlier zones' commits).
    // - `ZoneSubscriptions`: a zone's join gate (held across its subscribing: disk reads), then
    //   the process-wide `registry` (no disk I/O); members are called with neither held.
    // - `postedEntryFailures` (process-wide, Mirror+Delivering.swift): taken alone, after `core`
    //   is released.
    //
    // Lock order (a lock is only taken while holding those before it in this list):
    //
    //   account.switching → account.state → a zone's join gate → ZoneSubscriptions.registry
    //   account.switching → account.state → core (this mirror's, then a finishing mirror's own)
    //   core → a live view's state (its changes handed over; see Views/LiveView.swift)
    //   core → a Wakeup's mutex, the LentArrayCopy's, the clock's, an AsyncStream's or a
    //          continuation's internal lock
    //
    // A mirror's `core` is never held while taking `account` or the shared subscription's
    // locks, and a zone subscription never calls a member with its locks held, so members
    // take `core` freely.
    //
    // Why the pieces are separate: a user switch joins the new zone's subscription, which
    // may subscribe to the database (disk reads for the JSON-file database), so it runs
    // under `account.switching`, not `core`, and readers of `dataModel` never wait for it.
    // The wakeups have locks of their own so that a background task can wait on one
    // without holding `core`. The shared subscriptions are per process, not per mirror.
    //
    // The unlocked parts: `database`, `registrar` and `schema` are immutable or thread-safe.
    // Work outside the lock (database calls, encoding, decoding, conflict policies, posting
    // notifications, waking observers, live views applying their changes) happens between
    // two locked sections; each section
    // ends with `SyncEngine.drain(owner:)`, whose effects `deliver(_:)` carries out once the
    // lock is released.

    /// The database the mirror reads and commits to.
    public let database: any RecordDatabase

    /// The zone the mirror holds: its record type, scope and (for the private scope) user.
    ///
    /// A private mirror that follows a ``UserSession`` holds the current user's zone, which
    /// changes when the session switches users (see "Users" above).
    public var zone: ZoneID { core.withLock { $0.zone } }

    let core: MirrorLock<Record>
    let registrar = ObservationRegistrar()
    /// `\.dataModel` and `\.lastError`, made once: a key path of a generic class is
    /// instantiated at run time each time its literal is evaluated, which cost more than the
    /// rest of an edit.
    let dataModelKey: any KeyPath<Mirror<Record>, RecordArray<Record>> & Sendable = \Mirror<Record>.dataModel
    let lastErrorKey: any KeyPath<Mirror<Record>, MirrorError?> & Sendable = \Mirror<Record>.lastError
    /// Wakes the committing task: local changes, flushes.
    let commitWakeup = Wakeup()
    /// Wakes the pulling task: new tokens of the zone.
    let pullWakeup = Wakeup()
    /// Decodes stored records of any schema version and encodes records to store.
    let schema: SchemaCoder<Record>
    /// The user session a private mirror follows, and what following it takes.
    let account: MirrorAccountLink<Record>

    /// Opens a mirror of `Record` in `scope` of `database` and loads every stored record.
    ///
    /// When it returns, ``dataModel`` holds every stored record of the zone (see "Loading"
    /// above). The mirror then follows every change to the zone until it is deallocated.
    ///
    /// ```swift
    /// let todos = try await Mirror<Todo>(database: database)
    /// let mine = try await Mirror<Todo>(database: database, scope: .private)
    /// let sharedWithMe = try await Mirror<Todo>(database: database, scope: .shared)
    /// ```
    ///
    /// - Parameters:
    ///   - database: The database to mirror.
    ///   - scope: The scope of the records; ``Scope/public`` by default.
    ///   - user: The owner of the private zone to mirror (for the shared scope: the user the
    ///     records were shared with), for the private and shared scopes only. By default,
    ///     the database's ``RecordDatabase/connectedUser`` when it has one (a PostgreSQL
    ///     database's role); otherwise the current user of
    ///     ``MirrorConfiguration/userSession`` (``UserSession/shared``, which starts as the
    ///     operating-system account running the process), and the mirror follows that
    ///     session's user switches.
    ///   - conflictPolicy: How to settle conflicts; ``ConflictPolicy/changedKeys`` by default.
    ///   - configuration: Retry, batching and user-session settings.
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid record type, or a `user`
    ///   given with the public scope, which has no owner; ``MirrorError/Kind/unsupported``
    ///   for a ``MirrorConfiguration/cipher`` outside a private mirror of a named `user`, or
    ///   the shared scope on a database that is no ``SharingDatabase``, or for a `Record` that
    ///   declares ``Recordable/deleteRules`` on a database that is not a
    ///   ``RelationshipDatabase``; and whatever the database throws while storing those rules
    ///   or loading.
    public init(
        database: any RecordDatabase,
        scope: Scope = .public,
        user: MirrorUser? = nil,
        conflictPolicy: ConflictPolicy<Record> = .changedKeys,
        configuration: MirrorConfiguration = MirrorConfiguration()
    ) async throws {
        let hasUser = scope == .private || scope == .shared
        let user = user ?? (hasUser ? database.connectedUser : nil)
        let owner = hasUser ? user ?? configuration.userSession.user : user
        let zone = try ZoneID(Record.recordType, scope: scope, user: owner?.name)
        if scope == .shared, !(database is any SharingDatabase) {
            throw MirrorError(
                .unsupported, "the database \(type(of: database)) does not share records: it has no shared scope",
                recordType: Record.recordType, scope: scope)
        }
        try await Self.registerDeleteRules(in: database, zone: zone)
        self.schema = try Self.schemaCoder(scope: scope, user: user, configuration: configuration)
        self.database = database
        self.account = MirrorAccountLink(
            following: hasUser && user == nil ? configuration.userSession : nil)
        self.core = MirrorLock(SyncEngine(
            zone: zone, writerID: database.writerID, configuration: configuration, policy: conflictPolicy))
        // Join before loading, so that nothing committed after the load is missed.
        let membership = try ZoneSubscriptions.join(self, database: database, zone: zone)
        core.withLock { $0.subscription = membership }
        var set = try await database.fetchAll(in: zone)
        var decoded = schema.decodeAll(set.records)
        if configuration.undecodableRecords.failsOpening {
            try Self.failOpening(zone: zone, records: set.records, decoded: decoded)
        }
        let effects = core.withLock { engine in
            engine.load(&set, decoded: &decoded)
            return engine.drain(owner: self)
        }
        deliver(effects)
        startWorkers()
        followUserSession()
        offerConflictSettling()
    }

    /// Makes a mirror that finishes the commits of a mirror that switched users: it takes
    /// over the engine of the old user's zone, commits its changes there, and goes away
    /// once it has nothing left to commit and its predecessor forgot it (see
    /// Mirror+Account.swift).
    ///
    /// It shows nothing to anyone: it has no observers or streams. Its failures are posted
    /// as `.mirrorError` notifications and make its predecessor's ``flush()`` throw.
    init(finishing engine: SyncEngine<Record>, of predecessor: Mirror<Record>) {
        self.database = predecessor.database
        self.schema = predecessor.schema
        self.account = MirrorAccountLink(following: nil)
        self.core = MirrorLock(engine)
        // Joining the old zone's shared subscription tells its other mirrors in this
        // process of the commits at once; without it (it cannot fail while the predecessor
        // is a member) they hear of them from the database.
        let membership = try? ZoneSubscriptions.join(self, database: database, zone: engine.zone)
        core.withLock { $0.subscription = membership }
        startWorkers()
        let effects = core.withLock { $0.drain(owner: self) }
        deliver(effects)
        commitWakeup.signal()
    }


    deinit {
        let (ended, workers, subscription) = core.withLock { $0.close() }
        for task in workers { task.cancel() }
        commitWakeup.signal()
        pullWakeup.signal()
        subscription?.leave()
        for continuation in ended.changeStreams { continuation.finish() }
        for continuation in ended.errorStreams { continuation.finish() }
        for observer in ended.observers { observer.signal() }
    }

    // MARK: The array

    /// Every record of the zone, with local changes applied at once.
    ///
    /// Read it from any thread. Mutate it like an array; each mutation is committed in the
    /// background (see "Committing" above). It is a ``RecordArray``; its ``RecordArray/array``
    /// is a plain `[Record]`.
    ///
    /// ### One record per id
    ///
    /// The array holds each record once. Appending or inserting a record whose id is already
    /// there does not add a second copy: the new value **replaces the record in its place**,
    /// as `dictionary[id] = value` would, and is committed as an edit of it (``MirrorChange``
    /// reports `.updated`). Nothing you wrote is dropped, the array's positions do not shift,
    /// and two processes that append a record with the same chosen id (`"settings"`, say)
    /// meet in the conflict policy rather than in a crash or a lost value. When one mutation
    /// leaves several new copies of one id, the last one wins.
    ///
    /// ```swift
    /// mirror.dataModel.append(Todo(id: "pinned", title: "Call Ann"))
    /// mirror.dataModel.append(Todo(id: "pinned", title: "Call Bob"))   // replaces it
    /// // mirror.dataModel.count == 1, its title is "Call Bob"
    /// ```
    ///
    /// The exception is an id of one of ``skippedRecords``, stored records that do not decode
    /// as `Record` and so are not in the array: a record added with such an id is refused
    /// rather than overwrite data this version of `Record` cannot read. It leaves the array
    /// at once and the refusal is reported (see ``skippedRecords``).
    ///
    /// > Important: Mutate it synchronously. The mirror is locked while a mutation runs, so
    /// > other threads wait for it. From inside the mutation (for example in a
    /// > `removeAll(where:)` predicate) you may read the mirror's other properties
    /// > (``pendingChanges``, ``lastError``, ``zone``…), but reading or changing its records
    /// > (`dataModel`, a view, ``discardPendingChange(recordID:)``) is an overlapping access
    /// > that stops the program with a message saying so, as it would for a variable. Read
    /// > the records you need first.
    public var dataModel: RecordArray<Record> {
        get {
            registrar.access(self, keyPath: dataModelKey)
            return core.withLock { $0.records.array }
        }
        set {
            let changed = changingDataModel { engine in engine.replaceAll(with: newValue) }
            if changed { commitWakeup.signal() }
        }
        _modify {
            registrar.willSet(self, keyPath: dataModelKey)
            core.lock()
            let edit = core.engine.records.beginEdit()
            // The records move out of the engine while the caller mutates them, so that
            // reading the engine meanwhile is no overlapping access, and nothing is copied.
            core.lent = core.engine.records.lendArray()
            defer {
                let edited = core.takeLent()
                let changed = core.engine.endEdit(edit, returning: edited)
                let effects = core.engine.drain(owner: self)
                core.unlock()
                registrar.didSet(self, keyPath: dataModelKey)
                deliver(effects)
                if changed { commitWakeup.signal() }
            }
            yield &core.lent
        }
    }
}
