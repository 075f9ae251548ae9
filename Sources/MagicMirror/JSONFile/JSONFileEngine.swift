#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// What the zones of one engine share: the root directory, identity, file system seam,
/// subscriptions and problem log.
final class JSONFileContext: Sendable {
    let rootPath: String
    /// An open descriptor of the root directory; every path below it is opened relative to
    /// it, one component at a time, without following symbolic links.
    let rootFD: Int32
    let identifier: String
    let writerID: String
    let fileSystem: FileSystem
    let subscribers: SubscriberList
    let problems: JSONFileProblems
    /// Told the number of waiting commits of a zone whenever one starts waiting (tests).
    let queueObserver = Mutex<(@Sendable (ZoneID, Int) -> Void)?>(nil)

    init(
        rootPath: String, rootFD: Int32, identifier: String, writerID: String, fileSystem: FileSystem,
        subscribers: SubscriberList
    ) {
        self.rootPath = rootPath
        self.rootFD = rootFD
        self.identifier = identifier
        self.writerID = writerID
        self.fileSystem = fileSystem
        self.subscribers = subscribers
        self.problems = JSONFileProblems()
    }

    deinit { close(rootFD) }
}

/// The problems an engine found in its files (corrupt entries, failed background work):
/// each is kept and posted as a `.mirrorError` notification once per key.
///
/// Both the keys and the kept problems are bounded (``OncePerKey/defaultCapacity``): the
/// oldest are dropped first.
final class JSONFileProblems: Sendable {
    private struct State {
        var list: [MirrorError] = []
        var reported = OncePerKey<String>()
    }

    private let state = Mutex(State())
    private let center: NotificationCenter

    /// An empty log that posts on `center`.
    init(center: NotificationCenter = .default) {
        self.center = center
    }

    /// The problems reported so far, oldest first.
    var all: [MirrorError] { state.withLock { $0.list } }

    /// Whether a problem with this key was reported.
    func wasReported(_ key: String) -> Bool { state.withLock { $0.reported.contains(key) } }

    /// Keeps and posts `error`, unless a problem with the same key was reported before.
    func report(_ error: MirrorError, key: String) {
        let isNew = state.withLock { state -> Bool in
            guard state.reported.insert(key) else { return false }
            state.list.append(error)
            if state.list.count > state.reported.capacity { state.list.removeFirst() }
            return true
        }
        if isNew { center.post(name: .mirrorError, object: error) }
    }
}

/// The machinery behind every ``JSONFileDatabase`` opened on one directory in one process:
/// one writer id, one in-memory state per zone, one set of subscriptions, one watcher of the
/// zones that have subscribers.
final class JSONFileEngine: Sendable {
    let context: JSONFileContext
    let root: URL
    private let zones = Mutex<[ZoneID: JSONFileZone]>([:])
    /// The asset files of each zone used in this process (JSONFileDatabase+Assets.swift).
    let assetStores = Mutex<[ZoneID: JSONFileAssetStore]>([:])
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

    /// Opens an engine on a canonical path, reading (or creating) `database.json`.
    init(path: String, options: JSONFileDatabase.Options, fileSystem: FileSystem) throws(MirrorError) {
        let rootFD = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootFD >= 0 else { throw MirrorError.posix(errno, "open", file: path) }
        let identifier: String
        do {
            identifier = try Self.databaseIdentifier(rootFD: rootFD, rootPath: path, fileSystem: fileSystem)
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
            rootPath: path, rootFD: rootFD, identifier: identifier, writerID: writerID,
            fileSystem: fileSystem,
            subscribers: SubscriberList(onZoneActivity: { zone, _ in
                watcher.zoneActivityChanged(zone)
            }))
        watcher.attach(self)
    }

    deinit { watcher.stop() }

    /// The zone's state, loaded from disk on first use.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid zone; errors reading it.
    func zone(_ id: ZoneID) throws(MirrorError) -> JSONFileZone {
        try id.validate()
        let zone = zones.withLock { zones in
            if let zone = zones[id] { return zone }
            let zone = JSONFileZone(zone: id, context: context)
            zones[id] = zone
            return zone
        }
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
        guard let zone = zones.withLock({ $0[id] }) else { return }
        zone.catchUp()
    }

    // MARK: database.json

    /// Reads the database's identifier from `database.json`, creating the file (atomically,
    /// once, even with several processes racing) when it does not exist.
    private static func databaseIdentifier(
        rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> String {
        let name = JSONFileFormat.databaseFile
        let filePath = rootPath + "/" + name
        for _ in 0..<10 {
            do {
                let fd = try fileSystem.open(at: rootFD, name, flags: O_RDONLY | O_NOFOLLOW)
                defer { close(fd) }
                let bytes = try JSONFileIO.readAll(fd)
                return try identifier(in: bytes, file: filePath)
            } catch let failure as FileSystem.Failure where failure.code == ENOENT {
                // Create it below.
            } catch let failure as FileSystem.Failure {
                throw failure.mirrorError(file: filePath)
            } catch let error as MirrorError {
                throw error
            } catch {
                throw MirrorError(.ioFailure, "cannot read \(filePath)", file: filePath, underlying: error)
            }
            let temporary = "\(name).tmp-\(getpid())-\(UUID().uuidString.prefix(8))"
            let created = ISO8601DateFormatter().string(from: Date())
            let text = "{\"format\":\(JSONFileFormat.version),\"identifier\":\"\(UUID().uuidString)\","
                + "\"created\":\"\(created)\"}\n"
            do {
                let fd = try fileSystem.open(
                    at: rootFD, temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o666)
                defer { close(fd) }
                try fileSystem.write(fd, bytes: Array(text.utf8))
                try fileSystem.sync(fd)
            } catch {
                try? fileSystem.unlink(at: rootFD, temporary)
                throw error.mirrorError(file: rootPath + "/" + temporary)
            }
            defer { try? fileSystem.unlink(at: rootFD, temporary) }
            do {
                // link() fails if another process created the file first: then read theirs.
                try fileSystem.link(at: rootFD, temporary, to: name)
            } catch {
                if error.code == EEXIST { continue }
                if error.code == EPERM || error.code == ENOTSUP || error.code == EOPNOTSUPP {
                    // No hard links on this file system: fall back to a rename, unless
                    // another process created the file meanwhile.
                    if JSONFileIO.info(at: rootFD, name) != nil { continue }
                    do {
                        try fileSystem.rename(at: rootFD, temporary, to: name)
                    } catch {
                        throw error.mirrorError(file: filePath)
                    }
                } else {
                    throw error.mirrorError(file: filePath)
                }
            }
            try? fileSystem.sync(rootFD, metadata: true)
        }
        throw MirrorError(.ioFailure, "cannot create \(filePath)", file: filePath)
    }

    /// The identifier in the bytes of `database.json`.
    static func identifier(in bytes: [UInt8], file: String) throws(MirrorError) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            throw MirrorError(
                .corruptEntry,
                "\(file) is not a JSON object; it names the database's format and identifier. "
                    + "Restore it, or remove it to give the database a new identifier. Nothing was changed.",
                file: file)
        }
        guard let format = object["format"] as? Int else {
            throw MirrorError(.corruptEntry, "\(file) has no format version. Nothing was changed.", file: file)
        }
        guard format == JSONFileFormat.version else {
            throw MirrorError(
                .unsupportedFormat,
                "\(file) is in format \(format); this version of MagicMirror reads format "
                    + "\(JSONFileFormat.version) only. Nothing was changed.",
                file: file)
        }
        guard let identifier = object["identifier"] as? String, !identifier.isEmpty else {
            throw MirrorError(.corruptEntry, "\(file) has no identifier. Nothing was changed.", file: file)
        }
        return identifier
    }
}

/// Watches the directories of the zones that have subscribers for other writers' commits,
/// and catches those zones up (``JSONFileZone/catchUp()``) whenever something in them changed.
///
/// The zone directories are watched with a ``DirectoryWatcher``: inotify on Linux, kqueue on
/// macOS, and a `stat` poll every `pollInterval` for the directories that cannot be watched
/// natively (no mechanism, a limit reached) or when polling is asked for. Directories, not
/// files, are watched, since compaction renames a new snapshot and journal over the old
/// ones. The writers' `lock` file is ignored: taking and releasing it changes nothing.
///
/// A zone's directory always exists while it is watched: subscribing loads the zone, which
/// creates its directories. A zone is watched from its first subscription to its last, and
/// caught up once right after its watch starts, so that a commit made between the
/// subscriber's load and the start of the watch is not missed. Catching up is cheap when
/// nothing changed, so events caused by this process's own commits (or by several changes
/// reported together) cost two `stat` calls each.
final class JSONFileZoneWatcher: Sendable {
    private struct State {
        weak var engine: JSONFileEngine?
        /// The watched zones by directory path, as given to the watcher.
        var zonesByDirectory: [String: ZoneID] = [:]
        var isStopped = false
    }

    private let state = Mutex(State())
    private let watcher: DirectoryWatcher
    /// Catches every watched zone up now and then, whatever the watcher reported.
    private let sweep: Task<Void, Never>

    /// How often the sweep runs.
    ///
    /// File-system events are the fast path; the sweep is the safety net. A missed event
    /// (a watch limit reached mid-run, an event coalesced with a catch-up that found the
    /// zone busy) would otherwise leave this process's mirrors behind until the next commit.
    /// A sweep of a zone where nothing changed costs two `stat` calls.
    static let sweepInterval: Duration = .seconds(1)

    init(method: DirectoryWatcher.Method, pollInterval: Duration) {
        // The handler refers to the state only, weakly, so that the watcher never keeps
        // the engine alive; `stop()` (from the engine's deinit) ends it.
        let box = WeakZoneWatcher()
        watcher = DirectoryWatcher(
            method: method, pollInterval: pollInterval, ignoring: [JSONFileFormat.lockFile]
        ) { directory in
            box.watcher?.directoryChanged(directory)
        }
        // Holds the watcher only while sweeping; ends when it is stopped or deallocated.
        sweep = Task.detached(priority: .utility) {
            while !Task.isCancelled {
                try? await Task.sleep(for: JSONFileZoneWatcher.sweepInterval)
                guard !Task.isCancelled, let watcher = box.watcher else { return }
                watcher.sweepAll()
            }
        }
        box.watcher = self
    }

    /// Catches every watched zone up (see ``sweepInterval``).
    private func sweepAll() {
        let (engine, zones) = state.withLock { state in
            (state.isStopped ? nil : state.engine, Array(state.zonesByDirectory.values))
        }
        guard let engine else { return }
        for zone in zones { engine.catchUp(zone) }
    }

    /// Sets the engine whose zones are watched.
    func attach(_ engine: JSONFileEngine) {
        state.withLock { $0.engine = engine }
    }

    /// How the directory of `zone` is watched, or `nil` when it is not (tests).
    func method(for zone: ZoneID) -> DirectoryWatcher.Method? {
        guard let directory = state.withLock({ state in
            state.zonesByDirectory.first { $0.value == zone }?.key
        }) else { return nil }
        return watcher.method(for: directory)
    }

    /// Starts or stops watching a zone so that it is watched exactly while it has
    /// subscribers.
    ///
    /// Called when a zone's first subscription starts or its last ends. Those calls may
    /// arrive out of order when subscriptions start and end on several threads at once, so
    /// it looks at the subscriptions themselves, under its lock.
    func zoneActivityChanged(_ zone: ZoneID) {
        // The engine leaves the lock in the result, also when no watch starts: if this is its
        // last reference, its deinit stops this watcher, which takes the lock again.
        let (engine, started) = state.withLock { state -> (JSONFileEngine?, Bool) in
            guard !state.isStopped, let engine = state.engine else { return (nil, false) }
            let directory = engine.directoryPath(of: zone)
            let active = engine.context.subscribers.zones.contains(zone)
            let watched = state.zonesByDirectory[directory] != nil
            if active == watched { return (engine, false) }
            if !active {
                state.zonesByDirectory[directory] = nil
                watcher.remove(directory)
                return (engine, false)
            }
            do throws(MirrorError) {
                try watcher.add(directory)
                state.zonesByDirectory[directory] = zone
            } catch {
                // The zone's directory was made when it was loaded; it may have been removed
                // since. Report once; reads still catch up.
                engine.context.problems.report(
                    MirrorError(
                        error.kind,
                        "cannot watch \(directory) for other processes' commits: \(error.message)",
                        recordType: zone.recordType, scope: zone.scope, file: directory,
                        underlying: error),
                    key: "watch \(directory): \(error.message)")
                return (engine, false)
            }
            return (engine, true)
        }
        // What was committed between the subscriber's load and the start of the watch.
        if started { engine?.catchUp(zone) }
    }

    /// Something in a watched directory changed: catch its zone up. On the watcher's queue.
    private func directoryChanged(_ directory: String) {
        let (engine, zone) = state.withLock { state in (state.engine, state.zonesByDirectory[directory]) }
        guard let engine, let zone else { return }
        engine.catchUp(zone)
    }

    /// Stops watching every zone.
    func stop() {
        state.withLock { state in
            state.isStopped = true
            state.zonesByDirectory.removeAll()
        }
        // Outside the lock: cancelling waits for a handler in progress, which takes it.
        sweep.cancel()
        watcher.cancel()
    }
}

/// A weak reference to a ``JSONFileZoneWatcher``, set once right after it is made.
private final class WeakZoneWatcher: Sendable {
    private let reference = Mutex<WeakReference>(WeakReference())

    private struct WeakReference {
        weak var watcher: JSONFileZoneWatcher?
    }

    var watcher: JSONFileZoneWatcher? {
        get { reference.withLock { $0.watcher } }
        set { reference.withLock { $0.watcher = newValue } }
    }
}
