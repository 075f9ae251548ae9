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
/// each is kept and posted as a `.mirrorError` notification exactly once.
final class JSONFileProblems: Sendable {
    private let state = Mutex<(list: [MirrorError], keys: Set<String>)>(([], []))

    /// Every problem reported so far, oldest first.
    var all: [MirrorError] { state.withLock { $0.list } }

    /// Whether a problem with this key was reported.
    func wasReported(_ key: String) -> Bool { state.withLock { $0.keys.contains(key) } }

    /// Keeps and posts `error`, unless a problem with the same key was reported before.
    func report(_ error: MirrorError, key: String) {
        let isNew = state.withLock { state -> Bool in
            guard state.keys.insert(key).inserted else { return false }
            state.list.append(error)
            return true
        }
        if isNew { NotificationCenter.default.post(name: .mirrorError, object: error) }
    }
}

/// The machinery behind every ``JSONFileDatabase`` opened on one directory in one process:
/// one writer id, one in-memory state per zone, one set of subscriptions.
final class JSONFileEngine: Sendable {
    let context: JSONFileContext
    let root: URL
    let pollInterval: Duration
    private let zones = Mutex<[ZoneID: JSONFileZone]>([:])
    private let polls: JSONFilePoller

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
            let engine = try JSONFileEngine(path: path, options: options, fileSystem: FileSystem())
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
        let polls = JSONFilePoller(interval: options.pollInterval)
        self.polls = polls
        self.pollInterval = options.pollInterval
        self.root = URL(fileURLWithPath: path, isDirectory: true)
        self.context = JSONFileContext(
            rootPath: path, rootFD: rootFD, identifier: identifier, writerID: writerID,
            fileSystem: fileSystem,
            subscribers: SubscriberList(onZoneActivity: { zone, active in
                polls.setActive(zone, active)
            }))
        polls.attach(self)
    }

    deinit { polls.stopAll() }

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
    private static func identifier(in bytes: [UInt8], file: String) throws(MirrorError) -> String {
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

/// Watches the zones that have subscribers for other writers' commits by polling: every
/// interval, a cheap `stat` of each zone's snapshot and journal (``JSONFileZone/catchUp()``).
///
/// A poll starts with a zone's first subscription and stops with its last one.
final class JSONFilePoller: Sendable {
    private struct State {
        weak var engine: JSONFileEngine?
        var tasks: [ZoneID: Task<Void, Never>] = [:]
    }

    private let state = Mutex(State())
    private let interval: Duration

    init(interval: Duration) {
        self.interval = interval
    }

    /// Sets the engine whose zones are polled.
    func attach(_ engine: JSONFileEngine) {
        state.withLock { $0.engine = engine }
    }

    /// Starts or stops polling a zone.
    func setActive(_ zone: ZoneID, _ active: Bool) {
        let interval = interval
        let stopped = state.withLock { state -> Task<Void, Never>? in
            if active {
                guard state.tasks[zone] == nil, let engine = state.engine else { return nil }
                state.tasks[zone] = Task.detached { [weak engine] in
                    while !Task.isCancelled {
                        do {
                            try await Task.sleep(for: interval)
                        } catch {
                            return
                        }
                        guard let engine else { return }
                        engine.catchUp(zone)
                    }
                }
                return nil
            }
            return state.tasks.removeValue(forKey: zone)
        }
        stopped?.cancel()
    }

    /// Stops every poll.
    func stopAll() {
        let tasks = state.withLock { state in
            defer { state.tasks.removeAll() }
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
    }
}
