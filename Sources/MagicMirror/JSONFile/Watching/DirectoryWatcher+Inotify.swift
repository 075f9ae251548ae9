import Dispatch
import Foundation
import Synchronization

// Linux: one inotify instance per watcher, one watch per directory.

#if canImport(Glibc)
extension DirectoryWatcher.Core {
    /// The inotify instance and its watches.
    struct NativeState: ~Copyable {
        /// Whether `inotify_init1` was tried.
        var started = false
        /// The inotify descriptor; -1 when it is not open.
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        /// Watch descriptor → the directories it watches (several paths may name one
        /// directory, and inotify returns one watch for them).
        var directoriesByWatch: [Int32: Set<String>] = [:]
        var watchByDirectory: [String: Int32] = [:]
    }

    private static let watchMask = UInt32(
        IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM
            | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        if !state.native.started {
            state.native.started = true
            startInotify(&state.native)
        }
        let descriptor = state.native.descriptor
        guard descriptor >= 0, state.native.directoriesByWatch.count < nativeWatchLimit else {
            return .unavailable
        }
        let watch = inotify_add_watch(descriptor, directory, Self.watchMask)
        guard watch >= 0 else {
            let code = errno
            switch code {
            case ENOSPC, ENOMEM: return .unavailable  // the watch limit
            case ENOENT, ENOTDIR:
                return .failed(MirrorError(.notFound, "no directory to watch at \(directory)", file: directory))
            default: return .failed(MirrorError.posix(code, "inotify_add_watch", file: directory))
            }
        }
        state.native.directoriesByWatch[watch, default: []].insert(directory)
        state.native.watchByDirectory[directory] = watch
        return .watching
    }

    private func startInotify(_ native: inout NativeState) {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return }  // e.g. EMFILE: the instance limit; poll instead
        native.descriptor = descriptor
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.readEvents(from: descriptor) }
        let group = openSources
        source.setCancelHandler {
            close(descriptor)
            group.leave()
        }
        group.enter()
        native.source = source
        source.resume()
    }

    func removeNative(_ directory: String, state: inout State) {
        guard let watch = state.native.watchByDirectory.removeValue(forKey: directory) else { return }
        state.native.directoriesByWatch[watch]?.remove(directory)
        if state.native.directoriesByWatch[watch]?.isEmpty == true {
            state.native.directoriesByWatch[watch] = nil
            // The kernel then queues IN_IGNORED for the watch, which finds no directory.
            _ = inotify_rm_watch(state.native.descriptor, watch)
        }
    }

    func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        defer { state.native = NativeState() }
        // Cancelling the read source closes the inotify descriptor, which drops every watch.
        return state.native.source.map { [$0] } ?? []
    }

    /// Reads every queued event and reports the directories they name. On `queue`.
    private func readEvents(from descriptor: Int32) {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: bufferSize, alignment: MemoryLayout<inotify_event>.alignment)
        defer { buffer.deallocate() }
        var changedWatches: Set<Int32> = []
        var brokenWatches: Set<Int32> = []
        var overflowed = false
        while true {
            let count = read(descriptor, buffer.baseAddress, bufferSize)
            if count < 0 {
                if errno == EINTR { continue }
                break  // EAGAIN: drained (or the descriptor is going away)
            }
            if count == 0 { break }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let watch = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let nameLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = offset + headerSize
                offset = nameStart + nameLength
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    overflowed = true
                    continue
                }
                if mask & UInt32(IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF) != 0 {
                    brokenWatches.insert(watch)
                    continue
                }
                if nameLength > 0, !ignoredNames.isEmpty, offset <= count {
                    let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[nameStart..<offset])
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if ignoredNames.contains(name) { continue }
                }
                changedWatches.insert(watch)
            }
        }
        let changed: [String] = state.withLock { state in
            if overflowed {
                return state.directories.filter { $0.value == .native }.map(\.key)
            }
            var changed = changedWatches.flatMap { state.native.directoriesByWatch[$0] ?? [] }
            // A watch that broke (the directory was deleted or moved) was not removed by us:
            // report its directories and poll them from now on, which notices them coming back.
            let broken = brokenWatches.flatMap { state.native.directoriesByWatch[$0] ?? [] }
            changed += broken
            fallBackToPolling(broken, state: &state)
            return changed
        }
        deliver(changed)
    }
}
#endif
