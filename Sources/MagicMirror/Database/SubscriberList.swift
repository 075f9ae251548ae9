import Synchronization

/// The live subscriptions of a database, by zone; delivers notifications to them.
///
/// A database keeps one and returns the ``MirrorCancellable``s it makes.
package final class SubscriberList: Sendable {
    private struct Entry: Sendable {
        let zone: ZoneID
        let handler: @Sendable (RemoteNotification) -> Void
    }

    private let state = Mutex<(next: Int, entries: [Int: Entry])>((0, [:]))
    /// Called with a zone when its first subscription starts and when its last one ends
    /// (`true` / `false`), so a database can start and stop watching it.
    private let onZoneActivity: (@Sendable (ZoneID, Bool) -> Void)?

    package init(onZoneActivity: (@Sendable (ZoneID, Bool) -> Void)? = nil) {
        self.onZoneActivity = onZoneActivity
    }

    /// Adds a subscription.
    package func add(
        _ zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) -> MirrorCancellable {
        let (key, first) = state.withLock { state in
            let key = state.next
            state.next += 1
            let first = !state.entries.values.contains { $0.zone == zone }
            state.entries[key] = Entry(zone: zone, handler: handler)
            return (key, first)
        }
        if first { onZoneActivity?(zone, true) }
        return MirrorCancellable { [weak self] in self?.remove(key) }
    }

    private func remove(_ key: Int) {
        let lastOf: ZoneID? = state.withLock { state in
            guard let entry = state.entries.removeValue(forKey: key) else { return nil }
            return state.entries.values.contains { $0.zone == entry.zone } ? nil : entry.zone
        }
        if let lastOf { onZoneActivity?(lastOf, false) }
    }

    /// The zones with at least one subscription.
    package var zones: Set<ZoneID> { state.withLock { Set($0.entries.values.map(\.zone)) } }

    /// Delivers notifications to every subscription of their zone.
    package func deliver(_ notifications: [RemoteNotification]) {
        guard let zone = notifications.first?.zone else { return }
        let handlers = state.withLock { state in
            state.entries.values.filter { $0.zone == zone }.map(\.handler)
        }
        for notification in notifications {
            for handler in handlers { handler(notification) }
        }
    }
}
