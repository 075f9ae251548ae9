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
