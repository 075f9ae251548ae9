import Synchronization

/// Watches what a shared zone shows for a subscriber: the zone's grants, and the private
/// zones of the owners they name (subscribed to as grants come and go). Every change to
/// either is passed on as a notification of the shared zone carrying its new token.
///
/// Tokens are computed by reading the store, which a notification handler must not wait
/// for, so each change starts a short task that reads and delivers. Two such tasks may
/// deliver out of order; receivers keep the highest token and pull from their own, so a
/// late lower token changes nothing.
final class SharedZoneWatch<Store: GrantStore>: Sendable {
    private struct State {
        var cancelled = false
        var grants: MirrorCancellable?
        var owners: [MirrorUser: MirrorCancellable] = [:]
        /// The grants' sequence that `owners` follows: an older reading changes nothing.
        var followed = -1
    }

    private let store: Store
    private let zone: ZoneID
    private let handler: @Sendable (RemoteNotification) -> Void
    private let state = Mutex(State())

    init(store: Store, zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void) {
        self.store = store
        self.zone = zone
        self.handler = handler
    }

    /// Subscribes to the grants now, and to the owners' zones once the grants are read.
    func start() throws {
        let grants = try store.subscribeToGrants(of: zone) { [weak self] notification in
            self?.changed(notification.recordIDs, reason: notification.reason, writer: notification.writer)
        }
        state.withLock { $0.grants = grants }
        changed([], reason: .updated, writer: nil)
    }

    func cancel() {
        let subscriptions = state.withLock { state in
            state.cancelled = true
            defer { state.grants = nil; state.owners = [:] }
            return [state.grants].compactMap { $0 } + Array(state.owners.values)
        }
        for subscription in subscriptions { subscription.cancel() }
    }

    /// Reads the grants, follows their owners, and delivers the zone's token.
    private func changed(_ recordIDs: [String], reason: RemoteNotification.Reason, writer: String?) {
        Task { [weak self] in
            guard let self, !state.withLock({ $0.cancelled }) else { return }
            // A failed read (an owner's zone the process may not read) is the pull's to
            // report: the subscriber pulls on the next change and meets the error there.
            guard let view = try? await store.sharedView(of: zone, withRecords: false) else { return }
            if follow(Set(view.grants.values.map(\.owner)), grantsSequence: view.token.generation) {
                // Changes of a new owner's zone made before its subscription began are in no
                // notification: deliver the token once more, read after subscribing.
                changed(recordIDs, reason: reason, writer: writer)
            }
            let shared = recordIDs.filter { view.grants[$0] != nil }
            let notification = RemoteNotification(
                databaseIdentifier: store.identifier, zone: zone, recordIDs: shared, reason: reason,
                token: view.token, writer: writer)
            guard !state.withLock({ $0.cancelled }) else { return }
            handler(notification)
        }
    }

    /// Subscribes to the private zones of `owners` not followed yet, and stops following
    /// the others, unless a later reading of the grants was followed already.
    ///
    /// - Returns: Whether it subscribed to a new owner's zone.
    private func follow(_ owners: Set<MirrorUser>, grantsSequence: Int) -> Bool {
        let (added, removed) = state.withLock { state -> ([MirrorUser], [MirrorCancellable]) in
            guard !state.cancelled, grantsSequence >= state.followed else { return ([], []) }
            state.followed = grantsSequence
            let gone = state.owners.keys.filter { !owners.contains($0) }
            let removed = gone.compactMap { state.owners.removeValue(forKey: $0) }
            return (owners.filter { state.owners[$0] == nil }.sorted { $0.name < $1.name }, removed)
        }
        for subscription in removed { subscription.cancel() }
        var subscribed = false
        for owner in added {
            let ownerZone = ZoneID.private(zone.recordType, user: owner.name)
            guard let subscription = try? store.subscribe(to: ownerZone, handler: { [weak self] notification in
                self?.changed(notification.recordIDs, reason: notification.reason, writer: notification.writer)
            }) else { continue }
            let extra: MirrorCancellable? = state.withLock { state in
                guard !state.cancelled, state.owners[owner] == nil else { return subscription }
                state.owners[owner] = subscription
                return nil
            }
            extra?.cancel()
            subscribed = subscribed || extra == nil
        }
        return subscribed
    }
}
