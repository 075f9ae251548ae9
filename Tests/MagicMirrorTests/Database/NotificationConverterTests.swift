import Foundation
import MagicMirror
import Synchronization
import Testing

/// ``NotificationConverter``: one local notification per MagicMirror payload, none for any
/// other payload.
@Suite(.timeLimit(.minutes(5))) struct NotificationConverterTests {
    let change = RemoteNotification(
        databaseIdentifier: "db-1", zone: .public("Todo"), recordIDs: ["a"], reason: .updated,
        token: ChangeToken(generation: 0, sequence: 7), writer: "w-1")

    /// What an observer saw of one posted notification.
    struct Posted: Sendable {
        let name: Notification.Name
        /// The notification's `object`, when it is a ``RemoteNotification``.
        let object: RemoteNotification?
        /// The notification's `userInfo`, read back as a ``RemoteNotification``.
        let payload: RemoteNotification?
    }

    /// Records what is posted on a center of its own, so tests running in parallel do not
    /// see each other's notifications.
    final class Observed {
        let center = NotificationCenter()
        private let posted = ValueLog<Posted>()
        private var observer: (any NSObjectProtocol)?

        init(_ name: Notification.Name) {
            observer = center.addObserver(forName: name, object: nil, queue: nil) { [posted] notification in
                posted.append(Posted(
                    name: notification.name, object: notification.object as? RemoteNotification,
                    payload: notification.userInfo.flatMap { RemoteNotification(userInfo: $0) }))
            }
        }

        var notifications: [Posted] { posted.all }

        deinit {
            if let observer { center.removeObserver(observer) }
        }
    }

    @Test func postsExactlyOneLocalNotificationPerPayload() throws {
        let observed = Observed(.mirrorRemoteChange)
        let converter = MirrorNotificationConverter(notificationCenter: observed.center)

        #expect(converter.convertToLocal(from: change.userInfo))
        // Posting is synchronous: by now the observer has run.
        try #require(observed.notifications.count == 1)
        let posted = observed.notifications[0]
        #expect(posted.name == .mirrorRemoteChange)
        #expect(posted.object == change)
        #expect(posted.payload == change)

        // The same payload again is posted again (it is a hint; receivers pull).
        #expect(converter.convertToLocal(from: change.userInfo))
        #expect(observed.notifications.count == 2)
    }

    @Test func foreignPayloadsReturnFalseAndPostNothing() {
        let observed = Observed(.mirrorRemoteChange)
        let converter = MirrorNotificationConverter(notificationCenter: observed.center)
        var withoutMarker = change.userInfo
        withoutMarker["magicmirror"] = nil
        var malformed = change.userInfo
        malformed["recordType"] = "../etc"
        let foreign: [[AnyHashable: Any]] = [
            [:], ["aps": ["alert": "Hi"]], withoutMarker, malformed, [42: "numeric key"],
        ]
        for payload in foreign {
            #expect(!converter.convertToLocal(from: payload))
        }
        #expect(observed.notifications.isEmpty)
    }

    @Test func decodedNotificationsArePostedDirectly() {
        let observed = Observed(.mirrorRemoteChange)
        MirrorNotificationConverter(notificationCenter: observed.center).convertToLocal(change)
        #expect(observed.notifications.map(\.object) == [change])
    }

    /// A payload that travelled as JSON converts once it is parsed.
    @Test func convertsAPayloadThatTravelledAsJSON() throws {
        let observed = Observed(.mirrorRemoteChange)
        let converter = MirrorNotificationConverter(notificationCenter: observed.center)
        let received = try #require(
            try JSONSerialization.jsonObject(with: change.jsonData()) as? [String: Any])
        #expect(converter.convertToLocal(from: received))
        #expect(observed.notifications.map(\.object) == [change])
    }

    /// A type conforms with no code and posts on `NotificationCenter.default`, as
    /// MagicCloud's converter did.
    @Test func conformingTypesGetTheDefaultImplementation() {
        struct AppDelegate: NotificationConverter {}
        // A record type no other test uses, so parallel tests posting on the default
        // center do not interfere.
        let own = RemoteNotification(
            databaseIdentifier: "db-default-\(UUID().uuidString)", zone: .public("Todo"),
            recordIDs: ["x"], reason: .created, token: ChangeToken(generation: 0, sequence: 1))
        let seen = EventRecorder<String>()
        let observer = NotificationCenter.default.addObserver(
            forName: .mirrorRemoteChange, object: nil, queue: nil
        ) { notification in
            if (notification.object as? RemoteNotification) == own { seen.record("own") }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        #expect(AppDelegate().convertToLocal(from: own.userInfo))
        #expect(!AppDelegate().convertToLocal(from: ["aps": [:] as [String: Any]]))
        #expect(seen.count("own") == 1)
    }
}
