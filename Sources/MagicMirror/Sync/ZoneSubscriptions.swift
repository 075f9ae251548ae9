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
///   noticed by its watcher, or a commit of this process, told before the commit returns)
///   delivers here directly;
/// - a member's own commit is told here by the member when it ends
///   (``ZoneSubscriptionMembership/endCommit(upTo:)``), for databases that tell their
///   subscribers later or not at all;
/// - a payload the app hands to a ``NotificationConverter`` arrives as a
///   ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification on
///   `NotificationCenter.default`, which one process-wide observer forwards here.
///
/// A member never hears its own commit: while it commits
/// (``ZoneSubscriptionMembership/beginCommit()``), the tokens of this process's writer (the
/// database's ``RecordDatabase/writerID``) delivered are held for it, and when its commit
/// ends it is woken with the highest of them only when that is newer than what it committed
/// (or the commit failed). Other writers' tokens wake it at once, as they wake the others.
///
/// A token at or below the highest one delivered for the zone wakes nobody: so a converter
/// that posts nothing does not keep changes from the mirrors, and a notification that
/// comes back through `NotificationCenter` is dropped. The notifications the library posts
/// itself (through ``MirrorNotificationRouting/converter``) are not forwarded back here at
/// all. Members treat every token as a hint and pull the changes since their own, so a
/// change arrives exactly once however many hints there are, in whatever order.
enum ZoneSubscriptions {
    struct Key: Hashable, Sendable {
        let identifier: String
        let zone: ZoneID
    }

    private struct Member {
        weak var subscriber: (any ZoneSubscriber)?
        /// The member's commits under way: tokens delivered meanwhile are held for their end.
        var committing = 0
        /// The highest token delivered while the member was committing.
        var held: ChangeToken?
        /// How many times the member was woken (tests).
        var wakes = 0
    }

    /// One zone's shared subscription.
    private struct Shared {
        var subscription: MirrorCancellable?
        var members: [Int: Member] = [:]
        /// The highest token delivered to the members.
        var latest: ChangeToken?
        /// The writer id of this process's commits to the zone's database.
        var writerID: String?

        /// The members to wake with `token` (all but `except`), counting each wake-up; a
        /// member that is committing has it held instead when it is this process's writer's
        /// (`ownWriter`).
        mutating func wake(with token: ChangeToken, except: Int?, ownWriter: Bool) -> [any ZoneSubscriber] {
            var woken: [any ZoneSubscriber] = []
            for (number, member) in members where number != except {
                guard let subscriber = member.subscriber else { continue }
                if ownWriter && member.committing > 0 {
                    if member.held.map({ token > $0 }) ?? true { members[number]?.held = token }
                } else {
                    members[number]?.wakes += 1
                    woken.append(subscriber)
                }
            }
            return woken
        }
    }

    private struct Registry {
        var nextNumber = 0
        var zones: [Key: Shared] = [:]
        /// The gates of the zones being joined, with the number of joins using each.
        var gates: [Key: (gate: JoinGate, users: Int)] = [:]
    }

    /// One zone's joins, one at a time: held while a mirror joins that zone (and possibly
    /// subscribes, which reads the zone from disk for the JSON-file database). Taken before
    /// ``registry``, never while calling members. One per zone, not one per process, so that
    /// a zone loading from disk holds up only the mirrors joining that zone.
    private final class JoinGate: Sendable {
        let lock = Mutex(())
    }

    private static let registry = Mutex(Registry())

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
                // What the mirrors' own subscription posted: they have it.
                if MirrorNotificationRouting.isRouting(change) { return }
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
        // One join of a zone at a time subscribes, so that two mirrors opened at once never
        // make two subscriptions to one zone, even briefly.
        let gate = registry.withLock { registry -> JoinGate in
            let gate = registry.gates[key]?.gate ?? JoinGate()
            registry.gates[key] = (gate, (registry.gates[key]?.users ?? 0) + 1)
            return gate
        }
        defer {
            registry.withLock { registry in
                guard let (gate, users) = registry.gates[key] else { return }
                registry.gates[key] = users > 1 ? (gate, users - 1) : nil
            }
        }
        let number = try gate.lock.withLock { _ throws -> Int in
            let subscribed = registry.withLock { $0.zones[key] != nil }
            var fresh: MirrorCancellable?
            if !subscribed {
                fresh = try database.subscribe(to: zone) { notification in
                    // The mirrors first, then the public face (observers, forwarding).
                    ZoneSubscriptions.deliver(notification.token, to: key, writer: notification.writer)
                    MirrorNotificationRouting.route(notification)
                }
            }
            return registry.withLock { registry -> Int in
                var shared = registry.zones[key] ?? Shared()
                if let fresh { shared.subscription = fresh }
                shared.writerID = database.writerID
                let number = registry.nextNumber
                registry.nextNumber += 1
                shared.members[number] = Member(subscriber: subscriber)
                registry.zones[key] = shared
                return number
            }
        }
        return ZoneSubscriptionMembership(key: key, number: number)
    }

    /// Hints the members of a notification's database and zone in this process.
    static func deliver(_ notification: RemoteNotification) {
        deliver(
            notification.token, to: Key(identifier: notification.databaseIdentifier, zone: notification.zone),
            writer: notification.writer)
    }

    /// The number of live database subscriptions (0 or 1) and of members for a zone (tests).
    static func counts(identifier: String, zone: ZoneID) -> (subscriptions: Int, members: Int) {
        registry.withLock { registry in
            guard let shared = registry.zones[Key(identifier: identifier, zone: zone)] else { return (0, 0) }
            return (shared.subscription == nil ? 0 : 1, shared.members.count)
        }
    }

    /// Wakes every member with `token`, unless a token at least as high was delivered; a
    /// member that is committing has a token of this process's `writer` held for the end of
    /// its commit.
    static func deliver(_ token: ChangeToken, to key: Key, writer: String? = nil) {
        let members = registry.withLock { registry -> [any ZoneSubscriber] in
            guard var shared = registry.zones[key], shared.latest.map({ token > $0 }) ?? true else { return [] }
            shared.latest = token
            let woken = shared.wake(with: token, except: nil, ownWriter: writer != nil && writer == shared.writerID)
            registry.zones[key] = shared
            return woken
        }
        for member in members { member.zoneChanged(upTo: token) }
    }

    /// Notes that member `number` started a commit.
    fileprivate static func beginCommit(_ key: Key, number: Int) {
        registry.withLock { registry in
            registry.zones[key]?.members[number]?.committing += 1
        }
    }

    /// Notes that member `number`'s commit ended, at `token` when it was applied: wakes the
    /// other members with it when it is new, and the member itself with the token held for
    /// it when that is newer (or the commit was not applied).
    fileprivate static func endCommit(_ key: Key, number: Int, upTo token: ChangeToken?) {
        let (own, others) = registry.withLock {
            registry -> ((subscriber: any ZoneSubscriber, token: ChangeToken)?, [any ZoneSubscriber]) in
            guard var shared = registry.zones[key] else { return (nil, []) }
            var own: (subscriber: any ZoneSubscriber, token: ChangeToken)?
            if var member = shared.members[number] {
                member.committing = max(0, member.committing - 1)
                if member.committing == 0, let held = member.held {
                    member.held = nil
                    if let subscriber = member.subscriber, token.map({ held > $0 }) ?? true {
                        member.wakes += 1
                        own = (subscriber, held)
                    }
                }
                shared.members[number] = member
            }
            var others: [any ZoneSubscriber] = []
            if let token, shared.latest.map({ token > $0 }) ?? true {
                shared.latest = token
                others = shared.wake(with: token, except: number, ownWriter: true)
            }
            registry.zones[key] = shared
            return (own, others)
        }
        if let own { own.subscriber.zoneChanged(upTo: own.token) }
        if let token { for member in others { member.zoneChanged(upTo: token) } }
    }

    /// How many times a member was woken (tests).
    static func wakes(of key: Key, number: Int) -> Int {
        registry.withLock { $0.zones[key]?.members[number]?.wakes ?? 0 }
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

    /// Notes that this member starts a commit: the tokens of this process's writer delivered
    /// until it ends (``endCommit(upTo:)``) are held for it, since one of them may be its own.
    func beginCommit() {
        ZoneSubscriptions.beginCommit(key, number: number)
    }

    /// Notes that this member's commit ended, at `token` when it was applied (after the
    /// member took its outcome): the other members are woken with it when it is new, and
    /// this one with what was held for it only when that is newer than `token`.
    func endCommit(upTo token: ChangeToken?) {
        ZoneSubscriptions.endCommit(key, number: number, upTo: token)
    }

    /// How many times this member was woken (tests).
    var wakes: Int { ZoneSubscriptions.wakes(of: key, number: number) }

    /// Leaves the shared subscription. Calling it again does nothing.
    func leave() {
        if !left.exchange(true, ordering: .acquiringAndReleasing) { ZoneSubscriptions.leave(key, number: number) }
    }

    deinit { leave() }
}
