import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay

/// One client's hints waiting for its next long poll, bounded whatever it misses: at most one
/// hint per zone and reason. A new hint's record ids join the queued one's (at most
/// ``maximumIDs``), its token replaces an older one, and a writer is kept only while every
/// joined hint names the same.
struct HintQueue: Sendable {
    private struct Key: Hashable { let zone: ZoneID; let reason: RemoteNotification.Reason }

    /// The most record ids one hint carries.
    let maximumIDs: Int
    private var hints: [Key: RemoteNotification] = [:]
    private var ids: [Key: Set<String>] = [:]
    private var order: [Key] = []

    init(maximumIDs: Int = RelayWire.maximumHintIDs) { self.maximumIDs = maximumIDs }

    var isEmpty: Bool { order.isEmpty }
    /// How many hints wait: at most three per zone.
    var count: Int { order.count }

    /// Whether a hint of `zone` is queued.
    func holds(_ zone: ZoneID) -> Bool { order.contains { $0.zone == zone } }

    /// Queues `notification`, joined with the hint of its zone and reason if one waits.
    mutating func add(_ notification: RemoteNotification) {
        let key = Key(zone: notification.zone, reason: notification.reason)
        guard var queued = hints[key], var known = ids[key] else {
            var hint = notification
            hint.recordIDs = Array(hint.recordIDs.prefix(maximumIDs))
            hints[key] = hint
            ids[key] = Set(hint.recordIDs)
            order.append(key)
            return
        }
        for id in notification.recordIDs where known.count < maximumIDs && known.insert(id).inserted {
            queued.recordIDs.append(id)
        }
        queued.token = max(queued.token, notification.token)
        if queued.writer != notification.writer { queued.writer = nil }
        hints[key] = queued
        ids[key] = known
    }

    /// Drops the hints of zones no longer watched.
    mutating func remove(zones: Set<ZoneID>) {
        order.removeAll { zones.contains($0.zone) }
        hints = hints.filter { !zones.contains($0.key.zone) }
        ids = ids.filter { !zones.contains($0.key.zone) }
    }

    /// The hints in the order they were first queued; the queue is empty afterwards.
    mutating func drain() -> [RemoteNotification] {
        defer { self = HintQueue(maximumIDs: maximumIDs) }
        return order.compactMap { hints[$0] }
    }
}
