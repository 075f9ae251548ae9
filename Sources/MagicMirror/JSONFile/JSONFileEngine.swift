import Foundation
import Synchronization

/// The machinery behind every ``JSONFileDatabase`` opened on one directory in one process:
/// one writer id, one in-memory state per zone, one set of subscriptions, one watcher of the
/// zones that have subscribers.
///
/// `JSONFile/` is the embedded engine behind the database contract in `Database/`: the
/// database and this engine at its top, each zone's files (``JSONFileZone``), the on-disk
/// format in `Format/`, the watchers of other writers in `Watching/` and asset files in
/// `Assets/`.
final class JSONFileEngine: Sendable {
    let context: JSONFileContext
    let root: URL
    private let zones = Mutex<[ZoneID: JSONFileZone]>([:])
    /// The asset files of each zone used in this process (JSONFileDatabase+Assets.swift).
    let assetStores = Mutex<[ZoneID: JSONFileAssetStore]>([:])
    /// The delete rules and interrupted linked commits of each scope space
    /// (Relationships/JSONFileEngine+LinkedCommit.swift).
    let relationships = JSONFileRelationships()
    let watcher: JSONFileZoneWatcher

    private struct WeakEngine {
        weak var engine: JSONFileEngine?
    }

    /// The engines of this process by canonical root path.
    private static let registry = Mutex<[String: WeakEngine]>([:])

    /// The engine of `directory` in this process, opening it if needed.
    static func shared(directory: URL, options: JSONFileDatabase.Options) throws(MirrorError) -> JSONFileEngine {
        let path = try canonicalPath(of: directory)
        return try registry.withLock { registry throws(MirrorError) -> JSONFileEngine in
            if let engine = registry[path]?.engine { return engine }
            let engine = try JSONFileEngine(path: path, options: options, fileSystem: .live)
            registry = registry.filter { $0.value.engine != nil }
            registry[path] = WeakEngine(engine: engine)
            return engine
        }
    }

    /// Creates the directory if needed and resolves it to a canonical path.
    static func canonicalPath(of directory: URL) throws(MirrorError) -> String {
        let requested = directory.standardizedFileURL.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: requested, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw MirrorError(
                .invalidName, "\(requested) is a file, not a directory: a JSON-file database is a directory",
                file: requested, underlying: POSIXError(.ENOTDIR))
        }
        do {
            try FileManager.default.createDirectory(atPath: requested, withIntermediateDirectories: true)
        } catch {
            throw MirrorError(
                .ioFailure, "cannot create the database directory \(requested)", file: requested,
                underlying: error)
        }
        guard let resolved = realpath(requested, nil) else {
            throw MirrorError.posix(errno, "realpath", file: requested)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Opens an engine on a canonical path, reading (or creating) `database.json`. Its format
    /// is read here only: an engine opened on a format-1 database keeps appending as format 1
    /// asks after an upgrade, until it closes.
    init(
        path: String, options: JSONFileDatabase.Options, fileSystem: FileSystem,
        queueObserver: (@Sendable (ZoneID, Int) -> Void)? = nil,
        journalPieceSize: Int = JSONFileZone.journalPieceSize
    ) throws(MirrorError) {
        let rootFD = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootFD >= 0 else { throw MirrorError.posix(errno, "open", file: path) }
        let databaseFile: DatabaseFile
        do {
            databaseFile = try Self.databaseFile(rootFD: rootFD, rootPath: path, fileSystem: fileSystem)
        } catch {
            close(rootFD)
            throw error
        }
        var random = SystemRandomNumberGenerator()
        let writerID = "w\(getpid())-" + String(random.next() as UInt32, radix: 16)
        let watcher = JSONFileZoneWatcher(
            method: options.changeDetection == .polling ? .polling : .native,
            pollInterval: options.pollInterval)
        self.watcher = watcher
        self.root = URL(fileURLWithPath: path, isDirectory: true)
        self.context = JSONFileContext(
            rootPath: path, rootFD: rootFD, identifier: databaseFile.identifier,
            reservesJournalSpace: databaseFile.reservesJournalSpace, writerID: writerID, fileSystem: fileSystem,
            subscribers: SubscriberList(onZoneActivity: { zone, _ in
                watcher.zoneActivityChanged(zone)
            }),
            queueObserver: queueObserver, journalPieceSize: journalPieceSize)
        watcher.attach(self)
    }

    deinit { watcher.stop() }

    /// The zone's state, loaded from disk on first use.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone; errors reading it.
    func zone(_ id: ZoneID) throws(MirrorError) -> JSONFileZone {
        try id.validate()
        let (zone, isNew) = zones.withLock { zones in
            if let zone = zones[id] { return (zone, false) }
            let zone = JSONFileZone(zone: id, context: context)
            zones[id] = zone
            return (zone, true)
        }
        // A linked commit a crash interrupted is finished before its zones are read.
        if isNew { recoverLinkedCommitsOnFirstUse(of: id) }
        try zone.load()
        return zone
    }

    /// The path of a zone's directory.
    func directoryPath(of zone: ZoneID) -> String {
        ([context.rootPath] + JSONFileZone.components(of: zone)).joined(separator: "/")
    }

    /// Reads what other writers committed to a zone since the last look and notifies
    /// subscribers of their changes. Safe to call from any thread, any number of times;
    /// cheap when nothing changed. Zones not yet used in this process are skipped.
    func catchUp(_ id: ZoneID) {
        loadedZone(id)?.catchUp()
    }

    /// The zone, if this process used it already.
    func loadedZone(_ id: ZoneID) -> JSONFileZone? {
        zones.withLock { $0[id] }
    }
}
