import Foundation
import Synchronization

/// A mirror as the ``ZoneHub`` sees it: something to tell that its zone changed.
protocol ZoneHubMember: AnyObject, Sendable {
    /// The zone changed; its token is now at least `token`. Called on an arbitrary thread;
    /// must not block.
    func zoneChanged(upTo token: ChangeToken)
}

/// The per-process registry that shares one database subscription among every mirror of one
/// (database identifier, zone).
///
/// The first mirror of a zone subscribes; the others join its subscription; the last one to
/// leave cancels it. So there is one subscription per (database, scope, record type) per
/// process, and one notification per change however many mirrors there are.
///
/// The database's notifications go through ``MirrorNotificationRouting/converter``, which
/// posts ``Foundation/NSNotification/Name/mirrorRemoteChange`` on `NotificationCenter.default`;
/// the hub listens there (one observer for the whole process) and hints the members of the
/// notification's database and zone. A payload an app converts itself
/// (``NotificationConverter/convertToLocal(from:)``) arrives the same way. A commit made by
/// one of the members is handed to the others directly, so several mirrors of one zone in
/// one process see each other's commits as soon as they are applied. Members treat every
/// hint as a hint and pull the changes since their own token, which makes every change
/// arrive exactly once however many hints there are, in whatever order.
package enum ZoneHub {
    struct Key: Hashable, Sendable {
        let identifier: String
        let zone: ZoneID
    }

    private struct WeakMember {
        weak var member: (any ZoneHubMember)?
    }

    private struct Entry {
        var subscription: MirrorCancellable?
        var members: [Int: WeakMember] = [:]
    }

    private struct Registry {
        var nextNumber = 0
        var entries: [Key: Entry] = [:]
    }

    private static let registry = Mutex(Registry())
    /// Held while a mirror joins (and possibly subscribes); never while calling members.
    private static let joining = Mutex(())

    /// The process's one observer of ``Foundation/NSNotification/Name/mirrorRemoteChange`` on
    /// `NotificationCenter.default`, added when the first mirror joins and kept for the
    /// life of the process.
    private static let listener = LocalListener()

    private final class LocalListener: Sendable {
        private let token: Mutex<(any NSObjectProtocol)?>

        init() {
            token = Mutex(NotificationCenter.default.addObserver(
                forName: .mirrorRemoteChange, object: nil, queue: nil
            ) { notification in
                ZoneHub.receive(notification)
            })
        }

        /// Whether the observer was added (always; reading it makes sure it was).
        var isListening: Bool { token.withLock { $0 != nil } }
    }

    /// A ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification: hint the mirrors
    /// of its database and zone. The `object` is the ``RemoteNotification``; a converter of
    /// the app's own may post only the `userInfo` form.
    private static func receive(_ notification: Notification) {
        guard let change = notification.object as? RemoteNotification
            ?? notification.userInfo.flatMap(RemoteNotification.init(userInfo:))
        else { return }
        deliver(change)
    }

    /// Adds `member` to the hub of `zone` in `database`, subscribing to the zone when it is
    /// the first member.
    ///
    /// - Throws: What ``RecordDatabase/subscribe(to:handler:)`` throws.
    static func join(
        _ member: any ZoneHubMember, database: any RecordDatabase, zone: ZoneID
    ) throws -> ZoneHubMembership {
        let key = Key(identifier: database.identifier, zone: zone)
        precondition(listener.isListening)
        // One join at a time subscribes, so that two mirrors opened at once never make two
        // subscriptions to one zone, even briefly.
        let number = try joining.withLock { _ throws -> Int in
            let subscribed = registry.withLock { $0.entries[key] != nil }
            var fresh: MirrorCancellable?
            if !subscribed {
                fresh = try database.subscribe(to: zone) { notification in
                    MirrorNotificationRouting.route(notification)
                }
            }
            return registry.withLock { registry -> Int in
                var entry = registry.entries[key] ?? Entry()
                if let fresh { entry.subscription = fresh }
                let number = registry.nextNumber
                registry.nextNumber += 1
                entry.members[number] = WeakMember(member: member)
                registry.entries[key] = entry
                return number
            }
        }
        return ZoneHubMembership(key: key, number: number)
    }

    /// Hints the mirrors of a notification's database and zone in this process directly,
    /// without a local notification (tests; the local notifications arrive here too).
    package static func deliver(_ notification: RemoteNotification) {
        deliver(
            notification.token,
            to: Key(identifier: notification.databaseIdentifier, zone: notification.zone),
            except: nil)
    }

    /// The number of live database subscriptions the hub holds for a zone (0 or 1).
    package static func subscriptionCount(identifier: String, zone: ZoneID) -> Int {
        registry.withLock { $0.entries[Key(identifier: identifier, zone: zone)]?.subscription == nil ? 0 : 1 }
    }

    /// The number of mirrors registered for a zone.
    package static func memberCount(identifier: String, zone: ZoneID) -> Int {
        registry.withLock { $0.entries[Key(identifier: identifier, zone: zone)]?.members.count ?? 0 }
    }

    static func deliver(_ token: ChangeToken, to key: Key, except number: Int?) {
        let members = registry.withLock { registry -> [any ZoneHubMember] in
            guard let entry = registry.entries[key] else { return [] }
            return entry.members.compactMap { $0.key == number ? nil : $0.value.member }
        }
        for member in members { member.zoneChanged(upTo: token) }
    }

    static func leave(_ key: Key, number: Int) {
        let ended = registry.withLock { registry -> MirrorCancellable? in
            guard var entry = registry.entries[key] else { return nil }
            entry.members[number] = nil
            if entry.members.isEmpty {
                registry.entries[key] = nil
                return entry.subscription
            }
            registry.entries[key] = entry
            return nil
        }
        ended?.cancel()
    }
}

/// One mirror's place in a ``ZoneHub``; leaving (or deallocating it) removes the mirror,
/// and the zone's subscription with its last member.
final class ZoneHubMembership: Sendable {
    private let key: ZoneHub.Key
    private let number: Int
    private let left = Mutex(false)

    fileprivate init(key: ZoneHub.Key, number: Int) {
        self.key = key
        self.number = number
    }

    /// Tells the other members that this one committed changes up to `token`.
    func notifySiblings(upTo token: ChangeToken) {
        ZoneHub.deliver(token, to: key, except: number)
    }

    /// Leaves the hub. Calling it again does nothing.
    func leave() {
        let first = left.withLock { left in
            defer { left = true }
            return !left
        }
        if first { ZoneHub.leave(key, number: number) }
    }

    deinit { leave() }
}
