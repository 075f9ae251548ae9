@_spi(Testing) import MagicMirror

/// Waiting for a mirror's state in a test, instead of sleeping.
///
/// Each wait reads the state it waits for at once, then again after every step of the
/// mirror that may have changed it (a local mutation, a pull of remote changes, a commit's
/// outcome, a failure), and ends as soon as the condition holds. Nothing polls: between
/// two steps the waiting task is suspended. When the time is up, the state is read once
/// more (the reading task may not have run since the last step, on a busy machine); if
/// the condition still does not hold, the wait throws a
/// `MirrorError` of kind `MirrorError.Kind.timedOut` whose message shows the last value
/// it saw, abbreviated when it is large, so a failing test says what was there instead.
///
/// ```swift
/// mirror.dataModel.append(SampleRecord(title: "Milk"))
/// try await database.simulateSave(SampleRecord(title: "Eggs"))
/// try await mirror.waitUntil(timeout: .seconds(2)) { $0.count == 2 }
/// try await mirror.waitUntilCommitted()
/// ```
extension Mirror {
    /// Waits until the mirror's `Mirror.dataModel` satisfies a condition.
    ///
    /// The condition is checked at once, then after every change of the mirror, local or
    /// remote; the wait returns as soon as it holds. Use it to wait for a change another
    /// writer made (``InMemoryDatabase/simulateSave(_:scope:user:by:)``) to arrive:
    ///
    /// ```swift
    /// try await database.simulateSave(SampleRecord(title: "Eggs"))
    /// try await mirror.waitUntil(timeout: .seconds(2)) { records in
    ///     records.contains { $0.title == "Eggs" }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - timeout: How long to wait; 10 seconds by default.
    ///   - description: What is awaited, for the failure message (for example
    ///     `"the remote record"`).
    ///   - predicate: The condition on the records. Called on a background task, once per
    ///     check, and once more on the waiting task before a time-out is reported; it must
    ///     not mutate the mirror.
    /// - Returns: The records that satisfied the condition.
    /// - Throws: `MirrorError.Kind.timedOut` when the condition did not hold in time; the
    ///   message shows the records last seen (the first ten and how many more).
    ///   `MirrorError.Kind.cancelled` when the waiting task is cancelled. An error thrown
    ///   by `predicate` ends the wait as a `.timedOut` error whose
    ///   `MirrorError.underlying` is the original.
    @discardableResult
    public func waitUntil(
        timeout: Duration = .seconds(10),
        _ description: String? = nil,
        _ predicate: @escaping @Sendable (RecordArray<Record>) throws -> Bool
    ) async throws(MirrorError) -> RecordArray<Record> {
        try await waitForState(
            timeout: timeout, description ?? "the records of \(zone) to satisfy the condition",
            read: { $0.dataModel }, describe: { MirrorWaitDescription.list($0, noun: "record") },
            predicate: predicate)
    }

    /// Waits until the mirror's `Mirror.pendingChanges` satisfy a condition.
    ///
    /// Use it to wait for a step of the committing work, for example the third failed
    /// attempt to commit a change:
    ///
    /// ```swift
    /// database.failNextCommits(3, with: .diskFull)
    /// mirror.dataModel.append(record)
    /// try await mirror.waitUntilPendingChanges { $0.first?.failedAttempts == 3 }
    /// ```
    ///
    /// - Parameters:
    ///   - timeout: How long to wait; 10 seconds by default.
    ///   - description: What is awaited, for the failure message.
    ///   - predicate: The condition on the pending changes (oldest first). Called on a
    ///     background task, once per check, and once more on the waiting task before a
    ///     time-out is reported.
    /// - Returns: The pending changes that satisfied the condition.
    /// - Throws: `MirrorError.Kind.timedOut` when the condition did not hold in time; the
    ///   message shows the pending changes last seen, each with its last error.
    ///   `MirrorError.Kind.cancelled` when the waiting task is cancelled.
    @discardableResult
    public func waitUntilPendingChanges(
        timeout: Duration = .seconds(10),
        _ description: String? = nil,
        _ predicate: @escaping @Sendable ([PendingChange]) throws -> Bool
    ) async throws(MirrorError) -> [PendingChange] {
        try await waitForState(
            timeout: timeout, description ?? "the pending changes of \(zone) to satisfy the condition",
            read: { $0.pendingChanges }, describe: MirrorWaitDescription.pendingChanges,
            predicate: predicate)
    }

    /// Waits until every local change is committed: `Mirror.pendingChanges` is empty.
    ///
    /// Unlike `Mirror.flush()`, it only watches: it does not retry changes on hold, does
    /// not cut a retry's backoff short, and does not end when an attempt fails. That makes
    /// it the wait to use while a test injects faults and checks how the mirror copes with
    /// them by itself:
    ///
    /// ```swift
    /// database.failNextCommits(2, with: .ioFailure)
    /// mirror.dataModel.append(record)
    /// try await mirror.waitUntilCommitted()   // after two failed attempts and a retry
    /// ```
    ///
    /// - Parameter timeout: How long to wait; 10 seconds by default.
    /// - Throws: `MirrorError.Kind.timedOut` when changes are still pending after
    ///   `timeout` (for example one on hold after a failure that retrying cannot fix); the
    ///   message lists them with their last errors. `MirrorError.Kind.cancelled` when the
    ///   waiting task is cancelled.
    public func waitUntilCommitted(timeout: Duration = .seconds(10)) async throws(MirrorError) {
        try await waitUntilPendingChanges(timeout: timeout, "every change to \(zone) to be committed") {
            $0.isEmpty
        }
    }

    /// Waits until the mirror's `Mirror.lastError` is an error that satisfies a condition.
    ///
    /// `Mirror.lastError` is state: it keeps the most recent failure until a newer one
    /// replaces it, so this wait cannot miss a failure that happened before it was called
    /// (and returns at once for one that did). To count failures, or to check that each was
    /// posted exactly once, use an ``ErrorNotificationRecorder`` made before the code under
    /// test runs.
    ///
    /// ```swift
    /// database.availability = .readOnly
    /// mirror.dataModel.append(record)
    /// let error = try await mirror.waitForLastError { $0.kind == .readOnly }
    /// ```
    ///
    /// - Parameters:
    ///   - timeout: How long to wait; 10 seconds by default.
    ///   - description: What is awaited, for the failure message.
    ///   - predicate: The condition on the error; any error by default.
    /// - Returns: The error that satisfied the condition.
    /// - Throws: `MirrorError.Kind.timedOut` when no matching error was seen in time; the
    ///   message shows the last error seen. `MirrorError.Kind.cancelled` when the waiting
    ///   task is cancelled.
    @discardableResult
    public func waitForLastError(
        timeout: Duration = .seconds(10),
        _ description: String? = nil,
        where predicate: @escaping @Sendable (MirrorError) throws -> Bool = { _ in true }
    ) async throws(MirrorError) -> MirrorError {
        let error = try await waitForState(
            timeout: timeout, description ?? "an error of the mirror of \(zone) that satisfies the condition",
            read: { $0.lastError },
            describe: { $0.map { MirrorWaitDescription.clip($0.description) } ?? "no error" },
            predicate: { try $0.map(predicate) ?? false })
        guard let error else {
            // Unreachable: the predicate holds only for an error.
            throw MirrorError(.timedOut, "the wait for an error of \(zone) ended without one")
        }
        return error
    }

    /// Reads a part of the mirror's state now and after every step of the mirror, until
    /// `predicate` holds.
    private func waitForState<Value: Sendable>(
        timeout: Duration,
        _ description: String,
        read: @escaping @Sendable (Mirror) -> Value,
        describe: @escaping @Sendable (Value) -> String,
        predicate: @escaping @Sendable (Value) throws -> Bool
    ) async throws(MirrorError) -> Value {
        let reads = MirrorStateReads(mirror: self, read: read)
        do {
            return try await reads.firstElement(
                timeout: timeout, description, noun: "value", endingReader: true, describe: describe,
                satisfying: predicate)
        } catch where error.kind == .timedOut && error.underlying == nil {
            // The step that satisfied the condition may have run while the reading task
            // waited for a thread (on a busy machine the time-out and the mirror's last steps
            // can all be due before it runs): read the state once more before giving up.
            let value = read(self)
            if (try? predicate(value)) == true { return value }
            throw error
        }
    }
}

/// A part of a mirror's state, read when iteration starts and again after every step of the
/// mirror (`Mirror.observeState(_:)`): what the waits of `Mirror` iterate.
///
/// The steps only signal; the value is read on the iterating task, after the signal. So the
/// last value read is never older than the last step, however the signals were coalesced.
/// The iterator holds the mirror and its registration, and releases both when it goes away;
/// the waits return only once it has.
struct MirrorStateReads<Record: Recordable, Value: Sendable>: AsyncSequence, Sendable {
    typealias Element = Value

    let mirror: Mirror<Record>
    let read: @Sendable (Mirror<Record>) -> Value

    struct AsyncIterator: AsyncIteratorProtocol {
        let mirror: Mirror<Record>
        let read: @Sendable (Mirror<Record>) -> Value
        var signals: AsyncStream<Void>.Iterator
        /// Ends the registration when the iterator goes away.
        let registration: MirrorCancellable

        /// The state after the next step (at once, the first time).
        ///
        /// - Returns: The value, or `nil` when the iterating task is cancelled.
        mutating func next() async -> Value? {
            guard await signals.next() != nil else { return nil }
            return read(mirror)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        // Signals coalesce: a reader that falls behind reads the latest state once.
        let (signals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let registration = mirror.observeState { continuation.yield() }
        continuation.yield()
        return AsyncIterator(
            mirror: mirror, read: read, signals: signals.makeAsyncIterator(), registration: registration)
    }
}

/// Short descriptions of large values for the failure messages of the waits.
enum MirrorWaitDescription {
    /// How many items a list shows.
    static let shownItems = 10
    /// How many characters of one item's description are shown.
    static let itemLength = 200

    /// For example `3 records: [a, b, c]`, or `250 records: [a, …, j, and 240 more]`.
    static func list<Items: Collection>(_ items: Items, noun: String) -> String {
        let count = items.count
        let plural = count == 1 ? noun : noun + "s"
        guard count > 0 else { return "0 \(plural)" }
        var shown = items.prefix(shownItems).map { clip(String(describing: $0)) }
        if count > shownItems { shown.append("and \(count - shownItems) more") }
        return "\(count) \(plural): [\(shown.joined(separator: ", "))]"
    }

    /// Pending changes, each with its last error.
    static func pendingChanges(_ changes: [PendingChange]) -> String {
        let described = changes.map { change in
            var text = change.description
            if change.isCommitting { text += " committing" }
            if let error = change.lastError { text += " (last error: \(error.kind): \(error.message))" }
            return clip(text)
        }
        return list(described, noun: "pending change")
    }

    /// `text`, cut to ``itemLength`` characters.
    static func clip(_ text: String) -> String {
        text.count <= itemLength ? text : text.prefix(itemLength) + "…"
    }
}
