/// Who hears of a mirror's changes and failures, and what to tell them once its lock is
/// released: change and error streams, observers, the last error, and the error
/// notifications to post.
///
/// A value type with no locks: ``SyncEngine`` holds one. Streams are fed at once (yielding
/// to an `AsyncStream` does not run user code); observers are woken and notifications
/// posted by the mirror after the lock is released, from ``drain()``.
struct ChangeDelivery<Record: Recordable> {
    /// Whether the mirror still delivers.
    enum Lifecycle: Sendable, Equatable {
        case open
        /// The mirror is gone: new streams end at once, nothing is delivered.
        case closed
    }

    /// A failure to post, with the key of the bad stored entry it stands for, if any (posted
    /// once per process however many mirrors find it).
    struct Report {
        let error: MirrorError
        let entry: String?
    }

    /// What to do once the lock is released.
    struct Drained {
        var reports: [Report] = []
        var observers: [Wakeup] = []
        var stateObservers: [(number: Int, call: @Sendable () -> Void)] = []
    }

    /// What a closed mirror's owner ends, outside the lock.
    struct Closed {
        var changeStreams: [AsyncStream<MirrorChange<Record>>.Continuation] = []
        var errorStreams: [AsyncStream<MirrorError>.Continuation] = []
        var observers: [Wakeup] = []
    }

    /// The numbers handed out to the deliveries of a state handed over to another owner
    /// start here, far below the mirror's own, so that the two never share a number and a
    /// flush cancelled on the mirror can be looked for there.
    static var handedOverNumbering: Int { Int.min / 2 }

    private(set) var lifecycle = Lifecycle.open
    private(set) var lastError: MirrorError?
    private var outbox: [Report] = []
    private var observersDirty = false
    private var changeStreams: [Int: AsyncStream<MirrorChange<Record>>.Continuation] = [:] {
        didSet { hasChangeStreams = !changeStreams.isEmpty }
    }
    /// Whether ``changeStreams`` has any, kept apart: asking the dictionary, in generic code,
    /// costs metadata look-ups on every change.
    private var hasChangeStreams = false
    private var errorStreams: [Int: AsyncStream<MirrorError>.Continuation] = [:]
    private var observers: [Int: Wakeup] = [:]
    /// Called after every drain, whatever changed (MirrorTesting's waits). An array, so that
    /// a drain hands it out without copying.
    private var stateObservers: [(number: Int, call: @Sendable () -> Void)] = []
    private var lastNumber = 0

    var isClosed: Bool { lifecycle == .closed }

    /// A number for a new stream, observer or flush, unique in this mirror.
    mutating func makeNumber() -> Int {
        lastNumber += 1
        return lastNumber
    }

    // MARK: Delivering

    /// Hands a change to every change stream and marks the observers to wake.
    mutating func emit(_ change: MirrorChange<Record>) {
        observersDirty = true
        if hasChangeStreams { yieldToChangeStreams(change) }
    }

    private func yieldToChangeStreams(_ change: MirrorChange<Record>) {
        for continuation in changeStreams.values { continuation.yield(change) }
    }

    /// Marks the observers to wake (the records changed as a whole).
    mutating func touchObservers() {
        observersDirty = true
    }

    /// Reports a failure: sets ``lastError``, delivers it on the error streams, and queues
    /// its notification for ``drain()``.
    mutating func report(_ error: MirrorError, entry: String? = nil) {
        lastError = error
        for continuation in errorStreams.values { continuation.yield(error) }
        outbox.append(Report(error: error, entry: entry))
    }

    /// Hands out the notifications to post and the observers to wake.
    mutating func drain() -> Drained {
        var drained = Drained()
        if !outbox.isEmpty {
            drained.reports = outbox
            outbox.removeAll()
        }
        if observersDirty {
            observersDirty = false
            drained.observers = Array(observers.values)
        }
        drained.stateObservers = stateObservers
        return drained
    }

    // MARK: Listeners

    mutating func addChangeStream(_ number: Int, _ continuation: AsyncStream<MirrorChange<Record>>.Continuation) {
        if isClosed { continuation.finish() } else { changeStreams[number] = continuation }
    }

    mutating func removeChangeStream(_ number: Int) { changeStreams[number] = nil }

    mutating func addErrorStream(_ number: Int, _ continuation: AsyncStream<MirrorError>.Continuation) {
        if isClosed { continuation.finish() } else { errorStreams[number] = continuation }
    }

    mutating func removeErrorStream(_ number: Int) { errorStreams[number] = nil }

    mutating func addObserver(_ number: Int, _ wakeup: Wakeup) { observers[number] = wakeup }

    mutating func removeObserver(_ number: Int) { observers[number] = nil }

    mutating func addStateObserver(_ number: Int, _ call: @escaping @Sendable () -> Void) {
        if !isClosed { stateObservers.append((number, call)) }
    }

    mutating func removeStateObserver(_ number: Int) { stateObservers.removeAll { $0.number == number } }

    // MARK: Handing over and closing

    /// Moves every listener, the failures not posted yet and the numbering to the returned
    /// delivery (the mirror's, in its new zone); this one keeps the last error and numbers
    /// its own deliveries from ``handedOverNumbering``.
    mutating func handOver() -> ChangeDelivery {
        var moved = self
        moved.observersDirty = true
        self = ChangeDelivery()
        lastError = moved.lastError
        lifecycle = moved.lifecycle
        lastNumber = Self.handedOverNumbering
        return moved
    }

    /// Ends delivery: returns the streams to finish and the observers to wake.
    mutating func close() -> Closed {
        lifecycle = .closed
        defer {
            changeStreams.removeAll()
            errorStreams.removeAll()
            observers.removeAll()
            stateObservers.removeAll()
        }
        return Closed(
            changeStreams: Array(changeStreams.values), errorStreams: Array(errorStreams.values),
            observers: Array(observers.values))
    }
}
