import Foundation
import MirrorTestSupport
@testable import MagicMirror
import Synchronization
import Testing

/// The tests that replace the process-wide converter, ``MirrorNotificationRouting/converter``.
///
/// Serialized, and the only tests that replace it: two tests replacing it at once could
/// restore it in the wrong order and leave one's converter installed for the rest of the run.
/// Every other test reads it meanwhile (each database notification goes through it), so each
/// replacement forwards the payloads of every database but its own test's to the standard
/// converter.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MirrorNotificationRoutingTests {
    let zone = ZoneID.public("Chore")

    /// Installs `converter` and returns what puts back the standard one. A test of this
    /// suite that found another converter installed would be running beside another
    /// replacement: that is a failure.
    private func installProcessConverter(_ converter: some NotificationConverter & Sendable) -> @Sendable () -> Void {
        #expect(MirrorNotificationRouting.converter is MirrorNotificationConverter, "another test replaced the converter")
        MirrorNotificationRouting.converter = converter
        return { MirrorNotificationRouting.converter = MirrorNotificationConverter() }
    }

    @Test func everyDatabaseNotificationGoesThroughTheProcessConverter() async throws {
        let directory = try TemporaryDirectory("routing")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url)
        let recording = ForwardingConverter(identifier: database.identifier)
        let restore = installProcessConverter(recording)
        defer { restore() }
        let mirror = try await Mirror<Chore>(database: database)

        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let chore = Chore(id: "c1", title: "routed")
        try await seed([chore], into: writer)
        try await waitUntil(mirror, "the routed change") { $0 == [chore] }
        #expect(recording.payloads.items.compactMap { RemoteNotification(userInfo: $0.value) }.map(\.recordIDs) == [["c1"]])
    }

    /// The converter is the public face only: one that posts nothing does not keep other
    /// writers' changes from the mirrors.
    @Test func aConverterThatPostsNothingDoesNotStopSync() async throws {
        let directory = try TemporaryDirectory("silent-converter")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url)
        let restore = installProcessConverter(SwallowingConverter(identifier: database.identifier))
        defer { restore() }
        let mirror = try await Mirror<Chore>(database: database)

        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let chore = Chore(id: "c1", title: "not posted")
        try await seed([chore], into: writer)
        try await waitUntil(mirror, "the change nobody posted") { $0 == [chore] }
    }
}

/// A process converter that records the payloads of one database and forwards every
/// payload to the standard converter (other tests run meanwhile and need theirs).
final class ForwardingConverter: NotificationConverter, Sendable {
    let identifier: String
    let payloads = AsyncCollector<PayloadBox>()

    init(identifier: String) { self.identifier = identifier }

    func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool {
        if RemoteNotification(userInfo: userInfo)?.databaseIdentifier == identifier {
            payloads.append(PayloadBox(value: userInfo))
        }
        return MirrorNotificationConverter().convertToLocal(from: userInfo)
    }
}

/// A payload held for a test.
struct PayloadBox: @unchecked Sendable {
    // @unchecked Sendable: the payloads are made of strings, numbers, arrays and
    // dictionaries of them, and are only read.
    let value: [AnyHashable: Any]
}

/// A process converter that posts nothing for one database (and forwards the others'
/// payloads, which other tests running meanwhile need).
struct SwallowingConverter: NotificationConverter, Sendable {
    let identifier: String

    func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool {
        guard RemoteNotification(userInfo: userInfo)?.databaseIdentifier != identifier else { return false }
        return MirrorNotificationConverter().convertToLocal(from: userInfo)
    }
}
