import Foundation
@testable import MagicMirror
import Testing

@Suite(.timeLimit(.minutes(5))) struct HybridLogicalClockTests {
    @Test func observingManyReadingsMovesPastTheLatest() {
        let clock = HybridLogicalClock(wallClock: { 0 })
        clock.observe(latestOf: [
            HLCTimestamp(millis: 5, counter: 9), HLCTimestamp(millis: 9, counter: 3), HLCTimestamp(millis: 7, counter: 1),
        ])
        #expect(clock.now() == HLCTimestamp(millis: 9, counter: 4))
        // Older readings, and none at all, leave it where it is.
        clock.observe(latestOf: [HLCTimestamp(millis: 2, counter: 0)])
        clock.observe(latestOf: [HLCTimestamp]())
        #expect(clock.now() == HLCTimestamp(millis: 9, counter: 5))
    }
}

/// The clock's maximum offset: a reading further ahead of the wall clock is not adopted, and
/// no reading makes it trap.
@Suite(.timeLimit(.minutes(5))) struct HybridLogicalClockOffsetTests {
    @Test func aReadingTooFarAheadIsNotAdopted() {
        let clock = HybridLogicalClock(wallClock: { 1_000 })
        #expect(!clock.observe(HLCTimestamp(millis: .max, counter: .max)))
        #expect(!clock.observe(HLCTimestamp(millis: 1_000 + HybridLogicalClock.maximumOffset + 1)))
        #expect(clock.now() == HLCTimestamp(millis: 1_000, counter: 0))
        // At the limit: adopted.
        #expect(clock.observe(HLCTimestamp(millis: 1_000 + HybridLogicalClock.maximumOffset, counter: 3)))
        #expect(clock.now() == HLCTimestamp(millis: 1_000 + HybridLogicalClock.maximumOffset, counter: 4))
    }

    @Test func manyReadingsAdoptTheLatestThatIsNotTooFarAhead() {
        let clock = HybridLogicalClock(wallClock: { 1_000 })
        #expect(!clock.observe(latestOf: [
            HLCTimestamp(millis: 900, counter: 1), HLCTimestamp(millis: .max, counter: 0), HLCTimestamp(millis: 950),
        ]))
        #expect(clock.now() == HLCTimestamp(millis: 1_000, counter: 0))
        #expect(clock.observe(latestOf: [HLCTimestamp(millis: 2_000, counter: 7), HLCTimestamp(millis: 1_500)]))
        #expect(clock.now() == HLCTimestamp(millis: 2_000, counter: 8))
    }

    @Test func aCounterAtItsMaximumMovesToTheNextMillisecond() {
        let clock = HybridLogicalClock(wallClock: { 1_000 })
        #expect(clock.observe(HLCTimestamp(millis: 1_000, counter: .max - 1)))
        #expect(clock.now() == HLCTimestamp(millis: 1_000, counter: .max))
        #expect(clock.now() == HLCTimestamp(millis: 1_001, counter: 0))
        // A wall clock at the end of time does not trap either.
        let last = HybridLogicalClock(wallClock: { .max })
        #expect(last.observe(HLCTimestamp(millis: .max, counter: .max)))
        #expect(last.now() == HLCTimestamp(millis: .max, counter: 0))
    }
}
