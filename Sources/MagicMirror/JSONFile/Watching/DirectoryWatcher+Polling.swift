import Dispatch
import Foundation
import Synchronization

extension DirectoryWatcher.Core {
    /// The polled directories, what they looked like last time, and the timer.
    struct PollState: ~Copyable {
        var snapshots: [String: DirectorySnapshot] = [:]
        var timer: (any DispatchSourceTimer)?
    }

    func addPolled(_ directory: String, state: inout State) {
        state.poll.snapshots[directory] = DirectorySnapshot.take(directory, ignoring: ignoredNames)
        guard state.poll.timer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval = DispatchTimeInterval.nanoseconds(Int(Self.nanoseconds(pollInterval)))
        let leeway = DispatchTimeInterval.nanoseconds(Int(Self.nanoseconds(pollInterval) / 10))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: leeway)
        timer.setEventHandler { [weak self] in self?.poll() }
        let group = openSources
        timer.setCancelHandler { group.leave() }
        group.enter()
        state.poll.timer = timer
        timer.resume()
    }

    func removePolled(_ directory: String, state: inout State) {
        state.poll.snapshots[directory] = nil
        if state.poll.snapshots.isEmpty, let timer = state.poll.timer {
            state.poll.timer = nil
            timer.cancel()
        }
    }

    func takePollSources(_ state: inout State) -> [any DispatchSourceProtocol] {
        defer { state.poll = PollState() }
        return state.poll.timer.map { [$0] } ?? []
    }

    /// Looks at every polled directory and reports those that changed. On `queue`.
    private func poll() {
        let directories = state.withLock { Array($0.poll.snapshots.keys) }
        // Look without the lock: listing and `stat` can be slow.
        let looks = directories.map { ($0, DirectorySnapshot.take($0, ignoring: ignoredNames)) }
        let changed: [String] = state.withLock { state in
            var changed: [String] = []
            for (directory, look) in looks {
                guard let previous = state.poll.snapshots[directory] else { continue }  // removed
                if previous != look || look.mayHideAChange(after: previous.takenAt) {
                    state.poll.snapshots[directory] = look
                    changed.append(directory)
                }
            }
            return changed
        }
        deliver(changed)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1_000_000, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
