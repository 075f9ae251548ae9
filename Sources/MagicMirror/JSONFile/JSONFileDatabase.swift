import Foundation
import Synchronization

/// The embedded default ``RecordDatabase``: a directory of JSON files that any number of
/// mirrors and processes share, readable with `cat` and `jq`.
///
/// Each zone (one record type in one scope) is a directory holding a snapshot of its
/// records and an append-only journal with one committed change per line. Writers take a
/// short `flock` on the zone's lock file, catch up with what other writers appended, and
/// append; readers take no lock. When the journal outgrows the snapshot, the zone is
/// compacted into a new snapshot and a new generation's journal. The format is described
/// in <doc:JSONFileFormat>.
///
/// ```swift
/// let database = try JSONFileDatabase(directory: JSONFileDatabase.defaultDirectory)
/// try await database.commit(
///     [.save("a1", fields: Data(#"{"title":"Milk"}"#.utf8), baseVersion: 0,
///            timestamp: .init(millis: 1_763_703_120_123))],
///     to: .public("Todo"))
/// ```
///
/// Other processes' commits reach subscribers (and so mirrors) by themselves: each zone
/// with a subscriber has its directory watched — inotify on Linux, kqueue on macOS, a `stat`
/// poll where neither can be used (see ``Options/changeDetection``) — and every change in
/// it makes the database read the lines other writers appended, recognising its own by
/// writer id, and notify the zone's subscribers of the others' changes, typically within a
/// millisecond of the other process's commit.
///
/// Every `JSONFileDatabase` opened on the same directory in one process shares one engine:
/// one ``writerID``, one in-memory copy of each zone, one set of subscriptions. Opening it
/// twice is cheap and safe.
///
/// > Important: A commit returns once its change is appended and, with
/// > ``Durability/durable`` (the default), flushed to stable storage with `fsync`; it then
/// > survives the process being killed and the machine losing power. Commits waiting at
/// > the same time share one append and one `fsync` (group commit). A commit that fails
/// > stores nothing, and the journal stays appendable.
///
/// Bad data never stops a database from opening: a torn last line (a writer killed while
/// appending) is cut off, and a line that does not decode is skipped; in both cases its
/// bytes are copied to a quarantine file in the zone's directory and reported once, in
/// ``problems`` and as a `.mirrorError` notification (kind ``MirrorError/Kind/corruptEntry``).
///
/// Record types and user names become directory names and are checked with the name rules
/// (see ``ZoneID/validate()``). The database never writes outside its directory: it does
/// not follow symbolic links below it, and reports a zone reached through one as an error.
/// Private zones live under `private/<user>/`, whose directories are created with mode
/// 0700 and files with mode 0600.
public final class JSONFileDatabase: RecordDatabase {
    /// How a database behaves; every option has a default.
    public struct Options: Sendable {
        /// Whether commits wait for `fsync`. Default: ``Durability/durable``.
        public var durability: Durability
        /// Compact a zone when its journal is larger than both its snapshot and this many
        /// bytes. Default: 1 MiB. `Int.max` turns automatic compaction off (``compact(_:)``
        /// still works).
        public var compactionThreshold: Int
        /// How often zones with subscribers are checked for other processes' commits where
        /// they are polled (see ``changeDetection``). Default: 100 ms. Each check is a `stat`
        /// of each file in the zone's directory.
        public var pollInterval: Duration
        /// How other processes' commits are noticed. Default:
        /// ``ChangeDetection/fileSystemEvents``.
        public var changeDetection: ChangeDetection

        /// Creates options.
        ///
        /// - Parameters:
        ///   - durability: Whether commits wait for `fsync`.
        ///   - compactionThreshold: The journal size, in bytes, above which a zone whose
        ///     journal also outgrew its snapshot is compacted.
        ///   - pollInterval: How often polled zones look for other writers' commits.
        ///   - changeDetection: How other processes' commits are noticed.
        public init(
            durability: Durability = .durable,
            compactionThreshold: Int = 1 << 20,
            pollInterval: Duration = .milliseconds(100),
            changeDetection: ChangeDetection = .fileSystemEvents
        ) {
            self.durability = durability
            self.compactionThreshold = compactionThreshold
            self.pollInterval = pollInterval
            self.changeDetection = changeDetection
        }
    }

    /// How a database notices the commits of other processes to the zones it has
    /// subscribers for.
    ///
    /// Either way, a process recognises its own commits by their writer id and notifies
    /// its subscribers only of other writers' changes.
    public enum ChangeDetection: Sendable, Hashable {
        /// File-system events on each zone's directory: inotify on Linux, kqueue on macOS.
        /// Changes are noticed within about a millisecond. Zones that cannot be watched
        /// this way (no such mechanism, or the system's watch limit reached) are polled
        /// every ``Options/pollInterval`` instead.
        case fileSystemEvents
        /// A `stat` poll of each zone's directory every ``Options/pollInterval``. Choose it
        /// for a database on a network file system, whose events do not report other
        /// machines' writes.
        case polling
    }

    /// How far a commit goes before it returns.
    public enum Durability: Sendable, Hashable {
        /// The change is flushed to stable storage (`fsync`): it survives a power loss.
        case durable
        /// The change is written to the operating system, not flushed: it survives the
        /// process being killed, but may be lost if the machine loses power. Much faster.
        case relaxed
    }

    let engine: JSONFileEngine

    /// The options this instance was opened with.
    ///
    /// ``Options/durability`` and ``Options/compactionThreshold`` apply to the commits made
    /// through this instance. ``Options/pollInterval`` and ``Options/changeDetection`` belong
    /// to the engine shared by every instance on the directory in this process; the first
    /// one opened sets them.
    public let options: Options

    /// Opens (creating if needed) the database in `directory`.
    ///
    /// - Parameters:
    ///   - directory: The database's directory; created with its parents if it does not
    ///     exist. It may itself be a symbolic link.
    ///   - options: How the database behaves.
    /// - Throws: A ``MirrorError``: ``MirrorError/Kind/unsupportedFormat`` when the
    ///   directory holds a database in a format this version does not know (nothing is
    ///   changed then), or an I/O kind when it cannot be created or read.
    public init(directory: URL, options: Options = Options()) throws {
        self.engine = try JSONFileEngine.shared(directory: directory, options: options)
        self.options = options
    }

    /// Opens the database with its own engine, writer id and file system, as another
    /// process would: for tests of multi-writer behaviour and of injected failures.
    ///
    /// - Parameters:
    ///   - commitQueueObserver: Called with a zone and its number of waiting commits each time
    ///     a commit starts waiting for the zone's flusher (tests of group commit).
    ///   - journalPieceSize: How many bytes of a journal a load reads at a time (tests of
    ///     reading in pieces use small ones).
    package init(
        isolatedDirectory directory: URL, options: Options = Options(), fileSystem: FileSystem = .live,
        commitQueueObserver: (@Sendable (ZoneID, Int) -> Void)? = nil,
        journalPieceSize: Int = JSONFileZone.journalPieceSize
    ) throws {
        let path = try JSONFileEngine.canonicalPath(of: directory)
        self.engine = try JSONFileEngine(
            path: path, options: options, fileSystem: fileSystem, queueObserver: commitQueueObserver,
            journalPieceSize: journalPieceSize)
        self.options = options
    }

    /// The directory this process uses when none is given.
    ///
    /// `$MAGICMIRROR_DIRECTORY` when set; otherwise, on Linux, `$XDG_DATA_HOME/magicmirror`
    /// or `~/.local/share/magicmirror`, and on Apple platforms `MagicMirror` in the user's
    /// Application Support directory (`~/Library/Application Support/MagicMirror` on macOS,
    /// inside the app's container on iOS, tvOS, watchOS and visionOS). An app and its
    /// extensions that share one database pass the app group's container instead (see
    /// <doc:ApplePlatforms>).
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["MAGICMIRROR_DIRECTORY"], !path.isEmpty {
            return URL(fileURLWithPath: path, isDirectory: true)
        }
        #if canImport(Darwin)
        // `homeDirectoryForCurrentUser` is macOS only; Application Support exists everywhere.
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent("Library/Application Support")
        return support.appendingPathComponent("MagicMirror", isDirectory: true)
        #else
        let home = FileManager.default.homeDirectoryForCurrentUser
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data, isDirectory: true).appendingPathComponent("magicmirror", isDirectory: true)
        }
        return home.appendingPathComponent(".local/share/magicmirror", isDirectory: true)
        #endif
    }

    /// The database's directory, with symbolic links resolved.
    public var directory: URL { engine.root }

    /// The database's identifier, read from `database.json` (created with the database).
    public var identifier: String { engine.context.identifier }

    /// The id this process's commits to this directory carry, shared by every instance
    /// opened on it in this process.
    public var writerID: String { engine.context.writerID }

    /// The problems found in the files so far, oldest first: corrupt or torn entries that
    /// were quarantined (kind ``MirrorError/Kind/corruptEntry``, with the file and, when it
    /// can be seen, the record id), and background work that failed (automatic compaction).
    ///
    /// Each problem is also posted once as a notification named `.mirrorError` whose
    /// `object` is the ``MirrorError``. The latest 4096 are kept.
    public var problems: [MirrorError] { engine.context.problems.all }

    /// The directory of a zone on disk (it exists once the zone was used).
    package func directory(of zone: ZoneID) -> URL {
        var url = directory
        for component in JSONFileZone.components(of: zone) {
            url.appendPathComponent(component, isDirectory: true)
        }
        return url
    }

    /// Reads what other writers committed to `zone` since the last look and notifies its
    /// subscribers of their changes. Any trigger may call it (poll timer, file-system
    /// events), from any thread, any number of times; it is cheap when nothing changed.
    package func catchUp(_ zone: ZoneID) {
        engine.catchUp(zone)
    }

    /// How the directory of `zone` is watched for other processes' commits, or `nil` while
    /// it has no subscribers (tests).
    package func watchMethod(of zone: ZoneID) -> DirectoryWatcher.Method? {
        engine.watcher.method(for: zone)
    }

    /// The bytes of `zone`'s journals this process read, or 0 for a zone it did not use
    /// (tests).
    package func journalBytesRead(in zone: ZoneID) -> Int {
        engine.loadedZone(zone)?.journalBytesRead.load(ordering: .relaxed) ?? 0
    }

    /// Returns once no automatic compaction of `zone` is scheduled or running (tests).
    package func waitForBackgroundWork(in zone: ZoneID) async throws {
        try await engine.zone(zone).waitForBackgroundWork()
    }

    // MARK: RecordDatabase

    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        if zone.scope == .shared { return try await commitSharedEdits(operations, to: zone) }
        try ZoneState.validate(operations, zone: zone)
        let handle = try MirrorError.beforeStoring { () throws(MirrorError) in try engine.zone(zone) }
        if operations.isEmpty {
            return CommitOutcome(results: [], token: try handle.read { $0.token })
        }
        // Records that refer to assets are committed only while their files exist.
        let outcome = try await committingAssetReferences(of: operations, in: zone) {
            // A delete that delete rules reach is committed with their changes, atomically.
            if let linked = try await engine.linkedCommit(
                operations, to: zone, durable: options.durability == .durable)
            {
                return linked
            }
            return try await handle.commit(
                operations, durable: options.durability == .durable,
                compactionThreshold: options.compactionThreshold)
        }
        HybridLogicalClock.shared.observe(latestOf: operations.lazy.map(\.timestamp))
        return outcome
    }

    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        if zone.scope == .shared { return try await sharedFetchAll(in: zone) }
        return try engine.zone(zone).read { $0.completeChangeSet }
    }

    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        if zone.scope == .shared { return try await sharedFetch(recordIDs, in: zone) }
        return try engine.zone(zone).read { $0.fetch(recordIDs) }
    }

    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        if zone.scope == .shared { return try await sharedChanges(in: zone, since: token) }
        return try engine.zone(zone).read { $0.changes(since: token) }
    }

    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        if zone.scope == .shared { return try await sharedToken(in: zone) }
        return try engine.zone(zone).read { $0.token }
    }

    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        if zone.scope == .shared { return try sharedSubscribe(to: zone, handler: handler) }
        return try subscribeToStored(zone, handler: handler)
    }

    /// Subscribes to the records stored in `zone`'s directory (for a shared zone: its
    /// grants).
    func subscribeToStored(
        _ zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        // Loading first creates the zone's directories (so that a zone never written yet can
        // be watched) and makes the current files the baseline: later commits by other
        // writers are noticed relative to it. The zone's first subscription starts watching
        // its directory and catches up once more (JSONFileZoneWatcher).
        let handle = try engine.zone(zone)
        handle.catchUp()
        return engine.context.subscribers.add(zone, handler: handler)
    }

    /// Compacts a zone now: writes a snapshot of its live records, starts the next
    /// generation's journal and drops the deleted records' tombstones.
    ///
    /// Zones are also compacted automatically when their journal outgrows both their
    /// snapshot and ``Options/compactionThreshold``. Readers holding a token of the older
    /// generation get the complete zone (``ChangeSet/isComplete``) from
    /// ``changes(in:since:)``.
    ///
    /// - Throws: A ``MirrorError`` when the new files cannot be written; the zone is then
    ///   unchanged.
    public func compact(_ zone: ZoneID) async throws {
        let handle = try engine.zone(zone)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                do throws(MirrorError) {
                    try handle.compact(ifLargerThan: nil)
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
