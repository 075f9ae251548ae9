import Foundation
import MirrorTestSupport
@testable import MagicMirror
import Synchronization
import Testing

/// How remote notifications reach mirrors: through the `NotificationConverter`, as hints, one
/// subscription and one local notification per change however many mirrors there are.
@Suite(.timeLimit(.minutes(5))) struct MirrorNotificationTests {
    let zone = ZoneID.public("Chore")

    /// Saves a chore, as another writer would.
    private func save(_ id: String, _ title: String, base: Int = 0) throws -> RecordOperation {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return .save(
            id, fields: try encoder.encode(Chore(id: id, title: title)), baseVersion: base,
            timestamp: HybridLogicalClock.shared.now())
    }

    /// The notifications a database makes for other writers' changes, heard directly.
    private func listen(to database: any RecordDatabase) throws -> (AsyncCollector<RemoteNotification>, MirrorCancellable) {
        let heard = AsyncCollector<RemoteNotification>()
        let subscription = try database.subscribe(to: zone) { heard.append($0) }
        return (heard, subscription)
    }

    @Test(arguments: DatabaseFactory.all)
    func droppedRepeatedAndReorderedNotificationsLeaveEveryArrayRight(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        // The mirrors hear nothing from the database: only what the test delivers.
        let silent = ScriptedDatabase(opened.database)
        silent.silenceNotifications()
        let mirrors = [try await Mirror<Chore>(database: silent), try await Mirror<Chore>(database: silent)]
        let seen = mirrors.map { AsyncCollector($0.changes()) }
        let (heard, subscription) = try listen(to: opened.database)
        defer { subscription.cancel() }
        let writer = try await opened.otherWriter()
        let converter = MirrorNotificationConverter()
        var random = SplitMix64(seed: 0x5EED)
        var live: [String: Int] = [:]  // id → stored version
        var previousToken = ChangeToken.initial

        for round in 0..<6 {
            // Several commits: new records, an edit and a delete of earlier ones.
            var lastToken = ChangeToken.initial
            for index in 0..<3 {
                let id = "r\(round)-\(index)"
                let outcome = try await writer.commit([save(id, "new \(id)")], to: zone)
                lastToken = outcome.token
                live[id] = 1
            }
            if let (id, version) = live.filter({ !$0.key.hasPrefix("r\(round)-") }).min(by: { $0.key < $1.key }) {
                let outcome = try await writer.commit(
                    [save(id, "edited in round \(round)", base: version)], to: zone)
                lastToken = outcome.token
                live[id] = version + 1
            }
            if round % 2 == 1, let (id, version) = live.filter({ !$0.key.hasPrefix("r\(round)-") }).max(by: { $0.key < $1.key }) {
                let outcome = try await writer.commit([jsonDelete(id, base: version)], to: zone)
                lastToken = outcome.token
                live[id] = nil
            }
            let target = lastToken
            try await heard.wait("round \(round)'s notifications") { $0.contains { $0.token >= target } }

            // Deliver them shuffled, some dropped, some repeated, by both transport forms.
            let earlier = previousToken
            let fresh = heard.items.filter { $0.token > earlier }
            previousToken = target
            var delivered = fresh.filter { _ in Bool.random(using: &random) }
            if delivered.isEmpty, let any = fresh.randomElement(using: &random) { delivered = [any] }
            delivered += delivered.filter { _ in Bool.random(using: &random) }
            delivered.shuffle(using: &random)
            for (index, notification) in delivered.enumerated() {
                let payload = index % 2 == 0
                    ? notification.userInfo
                    : try #require(try JSONSerialization.jsonObject(with: notification.jsonData()) as? [String: Any])
                #expect(converter.convertToLocal(from: payload))
            }
            let expected = try await storedRecords(Chore.self, in: opened.database)
            for mirror in mirrors {
                try await waitUntil(mirror, "round \(round)") { records in
                    Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) }) == expected
                }
            }
        }

        // Every old notification again, in any order: nothing changes; then one more change
        // arrives as exactly one event.
        let eventCounts = seen.map(\.items.count)
        for notification in heard.items.shuffled(using: &random) + heard.items {
            #expect(converter.convertToLocal(from: notification.userInfo))
        }
        let sentinel = try await writer.commit([save("sentinel", "last")], to: zone)
        let target = sentinel.token
        try await heard.wait("the sentinel's notification") { $0.contains { $0.token == target } }
        #expect(converter.convertToLocal(from: try #require(heard.items.last).userInfo))
        for (mirror, events) in zip(mirrors, seen) {
            try await waitUntil(mirror, "the sentinel") { $0.contains { $0.id == "sentinel" } }
            try await events.wait(forCount: eventCounts[0] + 1, "the sentinel's event")
            #expect(events.items.count == eventCounts[0] + 1)
            #expect(events.items.last?.recordID == "sentinel")
            // Replaying the events gives the array: none was lost or delivered twice.
            var replayed: [String: Chore] = [:]
            for event in events.items {
                #expect(event.origin == .remote && event.state == .committed)
                switch event.kind {
                case .inserted: #expect(replayed[event.recordID] == nil, "inserted twice: \(event.recordID)")
                case .updated, .removed: #expect(replayed[event.recordID] != nil, "changed before inserted")
                }
                replayed[event.recordID] = event.record
            }
            #expect(replayed == Dictionary(uniqueKeysWithValues: mirror.dataModel.map { ($0.id, $0) }))
        }
        #expect(eventCounts.allSatisfy { $0 == eventCounts[0] })
    }

    @Test(arguments: DatabaseFactory.all)
    func mirrorsShareOneSubscriptionAndHearEachChangeOnce(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let database = ScriptedDatabase(opened.database)
        let posted = RemoteChangeRecorder(identifier: database.identifier)
        // Mirrors opened at the same time still make one subscription.
        var mirrors = try await withThrowingTaskGroup(of: Mirror<Chore>.self) { group in
            for _ in 0..<4 { group.addTask { try await Mirror<Chore>(database: database) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(database.subscribeCalls == 1)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).subscriptions == 1)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).members == 4)
        let json = opened.database as? JSONFileDatabase
        if let json { #expect(json.watchMethod(of: zone) == .native) }
        let seen = mirrors.map { AsyncCollector($0.changes()) }

        let writer = try await opened.otherWriter()
        let chore = Chore(id: "c1", title: "from another writer")
        try await seed([chore], into: writer)
        let later = Chore(id: "c2", title: "later")
        try await seed([later], into: writer)
        for mirror in mirrors {
            try await waitUntil(mirror, "both changes") { $0.map(\.id) == ["c1", "c2"] }
        }
        try await posted.notifications.wait("c2's local notification") { $0.contains { $0.recordIDs == ["c2"] } }
        // One local notification per change, however many mirrors; one event per mirror.
        #expect(posted.notifications.items.map(\.recordIDs) == [["c1"], ["c2"]])
        for events in seen {
            try await events.wait(forCount: 2, "two events")
            #expect(events.items.map(\.recordID) == ["c1", "c2"])
        }

        // The subscription, and the directory watch, end with the last mirror.
        mirrors.removeLast(3)
        #expect(database.liveSubscriptions == 1)
        mirrors.removeAll()
        for events in seen { try await events.waitForEnd("the mirrors to go away") }
        #expect(database.liveSubscriptions == 0)
        #expect(ZoneSubscriptions.counts(identifier: database.identifier, zone: zone).subscriptions == 0)
        if let json { #expect(json.watchMethod(of: zone) == nil) }
    }

    @Test(arguments: DatabaseFactory.all)
    func aPayloadTheAppReceivesUpdatesTheMirrors(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let silent = ScriptedDatabase(opened.database)
        silent.silenceNotifications()
        let mirror = try await Mirror<Chore>(database: silent)
        let (heard, subscription) = try listen(to: opened.database)
        defer { subscription.cancel() }
        let writer = try await opened.otherWriter()
        let chore = Chore(id: "c1", title: "sent over a socket")
        try await seed([chore], into: writer)
        try await heard.wait(forCount: 1, "the database's notification")
        #expect(mirror.dataModel.isEmpty, "nothing told the mirror yet")

        // The payload travels as JSON, as another machine would send it.
        let bytes = try #require(heard.items.first).jsonData()
        let payload = try #require(try JSONSerialization.jsonObject(with: bytes) as? [AnyHashable: Any])
        let converter = AppConverter()
        #expect(!converter.convertToLocal(from: ["aps": ["alert": "hello"]]), "not MagicMirror's")
        #expect(converter.convertToLocal(from: payload))
        try await waitUntil(mirror, "the converted payload") { $0 == [chore] }
        #expect(silent.subscribeCalls == 1)
    }
}

/// An app's converter that relies on the protocol's default: it posts on
/// `NotificationCenter.default`.
struct AppConverter: NotificationConverter {}

/// Records the `.mirrorRemoteChange` notifications posted for one database.
final class RemoteChangeRecorder: Sendable {
    let notifications = AsyncCollector<RemoteNotification>()
    private let observer: Mutex<(any NSObjectProtocol)?>

    init(identifier: String) {
        let notifications = self.notifications
        observer = Mutex(NotificationCenter.default.addObserver(
            forName: .mirrorRemoteChange, object: nil, queue: nil
        ) { notification in
            guard let change = notification.object as? RemoteNotification,
                  change.databaseIdentifier == identifier else { return }
            notifications.append(change)
        })
    }

    deinit {
        if let observer = observer.withLock({ $0 }) { NotificationCenter.default.removeObserver(observer) }
    }
}
