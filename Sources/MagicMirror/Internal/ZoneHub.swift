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
/// leave cancels it. A notification from the database, or a commit made by one of the
/// mirrors, is handed to every member at once, so several mirrors of one zone in one process
/// see each other's commits as soon as they are applied, without waiting for the database's
/// watcher. Members treat it as a hint and pull the changes since their own token, which
/// makes every change arrive exactly once however many hints there are.
package enum ZoneHub {
    struct Key: Hashable, Sendable {
        let identifier: String
        let zone: ZoneID
    }

    private struct WeakMember {
        weak var member: (any ZoneHubMember)?
    }

    private struct Entry {
        var subscription: DatabaseSubscription?
        var members: [Int: WeakMember] = [:]
    }

    private struct Registry {
        var nextNumber = 0
        var entries: [Key: Entry] = [:]
    }

    private static let registry = Mutex(Registry())

    /// Adds `member` to the hub of `zone` in `database`, subscribing to the zone when it is
    /// the first member.
    ///
    /// - Throws: What ``RecordDatabase/subscribe(to:handler:)`` throws.
    static func join(
        _ member: any ZoneHubMember, database: any RecordDatabase, zone: ZoneID
    ) throws -> ZoneHubMembership {
        let key = Key(identifier: database.identifier, zone: zone)
        let subscribed = registry.withLock { $0.entries[key]?.subscription != nil }
        var fresh: DatabaseSubscription?
        if !subscribed {
            fresh = try database.subscribe(to: zone) { notification in
                ZoneHub.deliver(notification.token, to: key, except: nil)
            }
        }
        let (number, unused) = registry.withLock { registry -> (Int, DatabaseSubscription?) in
            var entry = registry.entries[key] ?? Entry()
            var unused: DatabaseSubscription?
            if entry.subscription == nil {
                entry.subscription = fresh
            } else {
                unused = fresh
            }
            let number = registry.nextNumber
            registry.nextNumber += 1
            entry.members[number] = WeakMember(member: member)
            registry.entries[key] = entry
            return (number, unused)
        }
        unused?.cancel()
        return ZoneHubMembership(key: key, number: number)
    }

    /// Hands a notification that arrived by another route (for example a
    /// `NotificationConverter`) to the mirrors of its database and zone in this process.
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
        let ended = registry.withLock { registry -> DatabaseSubscription? in
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
