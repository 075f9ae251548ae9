import Foundation
import Synchronization

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
    ///
    /// A timer source, not a task sleeping in a loop: cancelling a `Task.sleep` wakes the
    /// task but leaves its timer (a sleep job, a dispatch source) allocated until the sleep
    /// would have ended, so a process opening and dropping databases quickly kept about
    /// 0.3 KiB per database for a second or more (#37). A cancelled source is released at
    /// once.
    private let sweep: SweepTimer

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
        // Holds the watcher only while sweeping; cancelled when it is stopped or deallocated.
        sweep = SweepTimer(every: Self.sweepInterval) { box.watcher?.sweepAll() }
        box.watcher = self
    }

    deinit {
        sweep.cancel()
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

/// A repeating timer on a global queue that runs a handler until it is cancelled.
private struct SweepTimer: @unchecked Sendable {
    // @unchecked Sendable: a dispatch source is thread-safe; it is only resumed here, once,
    // and cancelled (from any thread, any number of times) afterwards.
    private let source: any DispatchSourceTimer

    init(every interval: Duration, _ handler: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = interval.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        source = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        source.schedule(
            deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds),
            leeway: .nanoseconds(nanoseconds / 10))
        source.setEventHandler(handler: handler)
        source.resume()
    }

    func cancel() {
        source.cancel()
    }
}
