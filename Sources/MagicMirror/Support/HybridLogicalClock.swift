import Foundation
import Synchronization

/// A hybrid logical clock (Kulkarni et al.): readings never go backwards, stay close to
/// the wall clock, and move past every reading received from another writer that is at
/// most ``maximumOffset`` ahead of this machine's wall clock.
///
/// A reading further ahead is not adopted (as CockroachDB's clock refuses readings past its
/// maximum offset): whoever can store a record could otherwise move every reader's clock to
/// any point, up to the end of `Int64`, where the next reading would overflow and trap. The
/// caller that met it reports it (``observe(_:)`` says whether it was adopted).
package final class HybridLogicalClock: Sendable {
    /// How far ahead of the wall clock, in milliseconds, a reading made elsewhere may be and
    /// still be adopted: five minutes, far beyond the skew of clocks kept by NTP, and enough
    /// for a device whose clock is set by hand.
    package static let maximumOffset: Int64 = 5 * 60 * 1000

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

    /// A new reading, later than every reading this clock made or observed before. Never
    /// traps: a counter at its maximum moves on to the next millisecond.
    package func now() -> HLCTimestamp {
        let physical = wallClock()
        return last.withLock { last in
            if physical > last.millis {
                last = HLCTimestamp(millis: physical, counter: 0)
            } else if last.counter < .max {
                last.counter += 1
            } else {
                // Only adopted readings and the wall clock got here, so millis is far from
                // its maximum; the guard keeps a wall clock at the end of time from trapping.
                last = HLCTimestamp(millis: last.millis < .max ? last.millis + 1 : last.millis, counter: 0)
            }
            return last
        }
    }

    /// Moves the clock past a reading made elsewhere, so that the next ``now()`` is later,
    /// unless that reading is more than ``maximumOffset`` ahead of the wall clock.
    ///
    /// - Returns: `false` when the reading was too far ahead and not adopted: the caller
    ///   reports it, once (see ``isTooFarAhead(_:)``).
    @discardableResult
    package func observe(_ remote: HLCTimestamp) -> Bool {
        guard !isTooFarAhead(remote) else { return false }
        last.withLock { last in
            if remote > last { last = remote }
        }
        return true
    }

    /// Moves the clock past every reading of `readings` (a commit's operations): the same
    /// as observing each, with the lock taken once, for the latest (100,000 observations
    /// one by one took a few milliseconds after a large commit). Readings too far ahead are
    /// left out.
    @discardableResult
    package func observe(latestOf readings: some Sequence<HLCTimestamp>) -> Bool {
        let limit = self.limit()
        var latest: HLCTimestamp?
        var refused = false
        for reading in readings {
            if reading.millis > limit {
                refused = true
            } else if latest.map({ reading > $0 }) ?? true {
                latest = reading
            }
        }
        if let latest { observe(latest) }
        return !refused
    }

    /// Whether `reading` is more than ``maximumOffset`` ahead of the wall clock now.
    package func isTooFarAhead(_ reading: HLCTimestamp) -> Bool {
        reading.millis > limit()
    }

    private func limit() -> Int64 {
        let (limit, overflow) = wallClock().addingReportingOverflow(Self.maximumOffset)
        return overflow ? .max : limit
    }
}
