// The short examples of the testing articles, exactly as printed (DocumentationCodeBlockTests
// checks it): MagicMirror's "Testing Your Mirrors"
// (Sources/MagicMirror/Documentation.docc/TestingYourMirrors.md), a test of its own, and
// MirrorTesting's landing page (Sources/MirrorTesting/Documentation.docc/MirrorTesting.md).

import MagicMirror
import MirrorTesting
import Testing

@Test func aFullDiskDelaysAnItemButDoesNotLoseIt() async throws {
    let database = InMemoryDatabase()
    let quickRetries = MirrorConfiguration(retryDelay: .milliseconds(5))
    let items = try await Mirror<SampleRecord>(database: database, configuration: quickRetries)

    database.failNextCommits(1, with: .diskFull)
    items.dataModel.append(SampleRecord(title: "Milk"))
    try await items.waitUntilCommitted(timeout: .seconds(60))   // after a failure and a retry
    #expect(database.commitLog.map(\.isFailed) == [true, false])
    #expect(try database.records(SampleRecord.self).map(\.title) == ["Milk"])
}

@Suite(.timeLimit(.minutes(5))) struct MirrorTestingLandingPageTests {
    @Test func theOverviewExampleRuns() async throws {
let database = InMemoryDatabase()
database.failNextCommits(1, with: .diskFull)
let mirror = try await Mirror<SampleRecord>(database: database)
mirror.dataModel.append(SampleRecord(title: "Milk"))
try await mirror.waitUntilCommitted(timeout: .seconds(60))   // after a failed attempt and a retry

        #expect(database.commitLog.map(\.isFailed) == [true, false])
    }
}
