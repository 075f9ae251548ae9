import Foundation
import Synchronization

/// A hybrid logical clock (Kulkarni et al.): readings never go backwards, stay close to
/// the wall clock, and move past every reading received from another writer.
package final class HybridLogicalClock: Sendable {
    /// The clock shared by everything in this process.
    package static let shared = HybridLogicalClock()

    private let last = Mutex(HLCTimestamp.zero)
    private let wallClock: @Sendable () -> Int64

    /// Creates a clock; `wallClock` returns milliseconds since 1970 (tests pass their own).
    package init(wallClock: @escaping @Sendable () -> Int64 = {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }) {
        self.wallClock = wallClock
    }

    /// A new reading, later than every reading this clock made or observed before.
    package func now() -> HLCTimestamp {
        let physical = wallClock()
        return last.withLock { last in
            if physical > last.millis {
                last = HLCTimestamp(millis: physical, counter: 0)
            } else {
                last.counter += 1
            }
            return last
        }
    }

    /// Moves the clock past a reading made elsewhere, so that the next ``now()`` is later.
    package func observe(_ remote: HLCTimestamp) {
        last.withLock { last in
            if remote > last { last = remote }
        }
    }

    /// Moves the clock past every reading of `readings` (a commit's operations): the same
    /// as observing each, with the lock taken once, for the latest (100,000 observations
    /// one by one took a few milliseconds after a large commit).
    package func observe(latestOf readings: some Sequence<HLCTimestamp>) {
        if let latest = readings.max() { observe(latest) }
    }
}
