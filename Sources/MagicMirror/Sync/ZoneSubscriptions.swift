import Foundation
import Synchronization

/// A mirror as its shared zone subscription sees it: something to tell that its zone
/// changed.
protocol ZoneSubscriber: AnyObject, Sendable {
    /// The zone changed; its token is now at least `token`. Called on an arbitrary thread,
    /// with no lock held; must not block.
    func zoneChanged(upTo token: ChangeToken)
}

/// The process's shared zone subscriptions: one database subscription per (database
/// identifier, zone), shared by every mirror of that zone in this process.
///
/// The first mirror of a zone subscribes; the others join its subscription; the last one to
/// leave cancels it. Every new token of the zone wakes each member once, whichever way it
/// arrives:
///
/// - the database's subscription (for the JSON-file database, another process's commit
///   noticed by its watcher) delivers here directly;
/// - a member's own commit is delivered here by the member (``ZoneSubscriptionMembership/committed(upTo:)``);
/// - a payload the app hands to a ``NotificationConverter`` arrives as a
///   ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification on
///   `NotificationCenter.default`, which one process-wide observer forwards here.
///
/// A token at or below the highest one delivered for the zone wakes nobody: so the
/// notification a database's subscription also posts for observers (through
/// ``MirrorNotificationRouting/converter``) comes back as a repeat and is dropped, and a
/// converter that posts nothing does not keep changes from the mirrors. Members treat every
/// token as a hint and pull the changes since their own, so a change arrives exactly once
/// however many hints there are, in whatever order.
enum ZoneSubscriptions {
    struct Key: Hashable, Sendable {
        let identifier: String
        let zone: ZoneID
    }

    private struct WeakSubscriber {
        weak var subscriber: (any ZoneSubscriber)?
    }

    /// One zone's shared subscription.
    private struct Shared {
        var subscription: MirrorCancellable?
        var members: [Int: WeakSubscriber] = [:]
        /// The highest token delivered to the members.
        var latest: ChangeToken?
    }

    private struct Registry {
        var nextNumber = 0
        var zones: [Key: Shared] = [:]
    }

    private static let registry = Mutex(Registry())
    /// Held while a mirror joins (and possibly subscribes); taken before ``registry``, never
    /// while calling members.
    private static let joining = Mutex(())

    /// The process's one observer of ``Foundation/NSNotification/Name/mirrorRemoteChange`` on
    /// `NotificationCenter.default` (payloads the app converts itself), added when the first
    /// mirror joins and kept for the life of the process.
    private static let listener = AppNotificationListener()

    private final class AppNotificationListener: Sendable {
        private let token: Mutex<(any NSObjectProtocol)?>

        init() {
            token = Mutex(NotificationCenter.default.addObserver(
                forName: .mirrorRemoteChange, object: nil, queue: nil
            ) { notification in
                // The object is the RemoteNotification; a converter of the app's own may
                // post only the userInfo form.
                guard let change = notification.object as? RemoteNotification
                    ?? notification.userInfo.flatMap(RemoteNotification.init(userInfo:))
                else { return }
                ZoneSubscriptions.deliver(change)
            })
        }

        /// Whether the observer was added (always; reading it makes sure it was).
        var isListening: Bool { token.withLock { $0 != nil } }
    }

    /// Adds `subscriber` to the shared subscription of `zone` in `database`, subscribing to
    /// the zone when it is the first member.
    ///
    /// - Throws: What ``RecordDatabase/subscribe(to:handler:)`` throws.
    static func join(
        _ subscriber: any ZoneSubscriber, database: any RecordDatabase, zone: ZoneID
    ) throws -> ZoneSubscriptionMembership {
        let key = Key(identifier: database.identifier, zone: zone)
        precondition(listener.isListening)
        // One join at a time subscribes, so that two mirrors opened at once never make two
        // subscriptions to one zone, even briefly.
        let number = try joining.withLock { _ throws -> Int in
            let subscribed = registry.withLock { $0.zones[key] != nil }
            var fresh: MirrorCancellable?
            if !subscribed {
                fresh = try database.subscribe(to: zone) { notification in
                    // The mirrors first, then the public face (observers, forwarding).
                    ZoneSubscriptions.deliver(notification.token, to: key)
                    MirrorNotificationRouting.route(notification)
                }
            }
            return registry.withLock { registry -> Int in
                var shared = registry.zones[key] ?? Shared()
                if let fresh { shared.subscription = fresh }
                let number = registry.nextNumber
                registry.nextNumber += 1
                shared.members[number] = WeakSubscriber(subscriber: subscriber)
                registry.zones[key] = shared
                return number
            }
        }
        return ZoneSubscriptionMembership(key: key, number: number)
    }

    /// Hints the members of a notification's database and zone in this process.
    static func deliver(_ notification: RemoteNotification) {
        deliver(notification.token, to: Key(identifier: notification.databaseIdentifier, zone: notification.zone))
    }

    /// The number of live database subscriptions (0 or 1) and of members for a zone (tests).
    static func counts(identifier: String, zone: ZoneID) -> (subscriptions: Int, members: Int) {
        registry.withLock { registry in
            guard let shared = registry.zones[Key(identifier: identifier, zone: zone)] else { return (0, 0) }
            return (shared.subscription == nil ? 0 : 1, shared.members.count)
        }
    }

    /// Wakes every member with `token`, unless a token at least as high was delivered.
    static func deliver(_ token: ChangeToken, to key: Key) {
        let members = registry.withLock { registry -> [any ZoneSubscriber] in
            guard var shared = registry.zones[key], shared.latest.map({ token > $0 }) ?? true else { return [] }
            shared.latest = token
            registry.zones[key] = shared
            return shared.members.values.compactMap(\.subscriber)
        }
        for member in members { member.zoneChanged(upTo: token) }
    }

    static func leave(_ key: Key, number: Int) {
        let ended = registry.withLock { registry -> MirrorCancellable? in
            guard var shared = registry.zones[key] else { return nil }
            shared.members[number] = nil
            if shared.members.isEmpty {
                registry.zones[key] = nil
                return shared.subscription
            }
            registry.zones[key] = shared
            return nil
        }
        ended?.cancel()
    }
}

/// One mirror's place in a shared zone subscription; leaving (or deallocating it) removes
/// the mirror, and the zone's database subscription with its last member.
final class ZoneSubscriptionMembership: Sendable {
    private let key: ZoneSubscriptions.Key
    private let number: Int
    private let left = Atomic(false)

    fileprivate init(key: ZoneSubscriptions.Key, number: Int) {
        self.key = key
        self.number = number
    }

    /// Tells every member (this one included) that the member committed changes up to
    /// `token`.
    func committed(upTo token: ChangeToken) {
        ZoneSubscriptions.deliver(token, to: key)
    }

    /// Leaves the shared subscription. Calling it again does nothing.
    func leave() {
        if !left.exchange(true, ordering: .acquiringAndReleasing) { ZoneSubscriptions.leave(key, number: number) }
    }

    deinit { leave() }
}
