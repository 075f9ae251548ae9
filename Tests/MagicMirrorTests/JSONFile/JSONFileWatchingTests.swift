import Foundation
import MagicMirror
import Testing

/// How a JSON-file database notices other writers' commits: its zone directories are watched
/// (natively, or by polling when asked) exactly while they have subscribers.
@Suite(.timeLimit(.minutes(5))) struct JSONFileWatchingTests {
    let zone = ZoneID.public("Todo")

    @Test(arguments: [JSONFileDatabase.ChangeDetection.fileSystemEvents, .polling])
    func aZoneNeverWrittenIsWatchedFromItsFirstSubscription(detection: JSONFileDatabase.ChangeDetection) async throws {
        let directory = try TemporaryDirectory("watch-new-zone")
        defer { directory.remove() }
        let reader = try JSONFileDatabase(
            isolatedDirectory: directory.url,
            options: .init(pollInterval: .milliseconds(10), changeDetection: detection))
        let fresh = ZoneID.private("Todo", user: "dana")
        #expect(!FileManager.default.fileExists(atPath: reader.directory(of: fresh).path))
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
        let subscription = try reader.subscribe(to: fresh) { continuation.yield($0) }
        defer { subscription.cancel() }
        // Subscribing made the zone's directory, so it can be watched before anyone writes.
        #expect(FileManager.default.fileExists(atPath: reader.directory(of: fresh).path))
        #expect(reader.watchMethod(of: fresh) == (detection == .polling ? .polling : .native))

        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("first", ["v": 1])], to: fresh)
        let heard = try await firstValue(of: stream, within: testTimeout)
        #expect(heard.recordIDs == ["first"])
        #expect(heard.zone == fresh)
        #expect(heard.writer == writer.writerID)
    }

    /// The periodic sweep is the safety net under the watcher: with a watch that never fires
    /// (polling once an hour), another writer's commit still arrives.
    @Test func theSweepCatchesUpWhenTheWatchMissesAChange() async throws {
        let directory = try TemporaryDirectory("watch-sweep")
        defer { directory.remove() }
        let reader = try JSONFileDatabase(
            isolatedDirectory: directory.url, options: .init(pollInterval: .seconds(3600), changeDetection: .polling))
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteNotification.self)
        let subscription = try reader.subscribe(to: zone) { continuation.yield($0) }
        defer { subscription.cancel() }
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await writer.commit([jsonSave("swept", ["v": 1])], to: zone)
        let heard = try await firstValue(of: stream, within: testTimeout)
        #expect(heard.recordIDs == ["swept"])
        #expect(heard.writer == writer.writerID)
    }

    @Test func theWatchLastsWhileTheZoneHasSubscribers() async throws {
        let directory = try TemporaryDirectory("watch-lifetime")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(database.watchMethod(of: zone) == nil)
        let first = try database.subscribe(to: zone) { _ in }
        let second = try database.subscribe(to: zone) { _ in }
        #expect(database.watchMethod(of: zone) == .native)
        first.cancel()
        #expect(database.watchMethod(of: zone) == .native)
        second.cancel()
        #expect(database.watchMethod(of: zone) == nil)
        let again = try database.subscribe(to: zone) { _ in }
        #expect(database.watchMethod(of: zone) == .native)
        again.cancel()
    }

    @Test func ownCommitsAreRecognisedByWriterID() async throws {
        let directory = try TemporaryDirectory("watch-own")
        defer { directory.remove() }
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let heard = AsyncCollector<RemoteNotification>()
        let subscription = try database.subscribe(to: zone) { heard.append($0) }
        defer { subscription.cancel() }
        // This engine's own commit is announced by the commit itself; the file-system
        // events it makes are recognised as its own and announce nothing more. The other
        // writer's commit, watched after it, is announced once.
        try await database.commit([jsonSave("own", ["v": 1])], to: zone)
        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await other.commit([jsonSave("other", ["v": 1])], to: zone)
        try await heard.wait("the other writer's commit") { $0.contains { $0.recordIDs == ["other"] } }
        #expect(heard.items.map(\.recordIDs) == [["own"], ["other"]])
        #expect(heard.items.map(\.writer) == [database.writerID, other.writerID])
    }
}
