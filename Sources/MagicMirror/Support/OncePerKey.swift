/// The keys already acted on, so that something is done once per key: a problem found over
/// and over is reported once.
///
/// It remembers at most ``capacity`` keys and forgets the oldest first, so a process that
/// runs for months and keeps meeting new keys holds a bounded set; a key forgotten that
/// way counts as new again. A value: its owner guards it (for example with a `Mutex`).
///
/// ```swift
/// var reported = OncePerKey<String>()
/// if reported.insert("catch-up \(directory)") { post(error) }
/// ```
struct OncePerKey<Key: Hashable> {
    /// The most keys remembered.
    let capacity: Int
    private var keys: Set<Key> = []
    /// The remembered keys in the order they came, as a ring: the oldest is at `oldest`
    /// once the ring is full.
    private var arrivals: [Key] = []
    private var oldest = 0

    /// The number of keys remembered by default: far more than the distinct problems a
    /// database meets, far less memory than a process should spend on remembering them.
    static var defaultCapacity: Int { 4096 }

    /// An empty set that remembers up to `capacity` keys (at least one).
    init(capacity: Int = defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// Remembers `key`.
    ///
    /// - Returns: `true` when the key was not remembered (act on it now), `false` when it was.
    mutating func insert(_ key: Key) -> Bool {
        guard keys.insert(key).inserted else { return false }
        if arrivals.count < capacity {
            arrivals.append(key)
        } else {
            keys.remove(arrivals[oldest])
            arrivals[oldest] = key
            oldest = (oldest + 1) % capacity
        }
        return true
    }

    /// Whether `key` is remembered.
    func contains(_ key: Key) -> Bool { keys.contains(key) }

    /// The number of keys remembered.
    var count: Int { keys.count }
}

extension OncePerKey: Sendable where Key: Sendable {}
