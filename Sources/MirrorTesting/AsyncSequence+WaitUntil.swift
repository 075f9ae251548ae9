import MagicMirror
import Synchronization

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Waits for the first element that satisfies a condition, failing after a timeout with
    /// a message that shows the last element seen.
    ///
    /// Use it to wait for an event in a test instead of sleeping: the wait ends as soon as a
    /// matching element arrives, and a failure says what was there instead.
    ///
    /// For example, wait until the commit log of an ``InMemoryDatabase`` shows three failed
    /// commits:
    ///
    /// ```swift
    /// try await database.commitLogUpdates.waitUntil(timeout: .seconds(5)) { log in
    ///     log.filter(\.isFailed).count == 3
    /// }
    /// ```
    ///
    /// The elements are read in a task of their own, which is cancelled when the wait ends;
    /// a sequence that ignores cancellation (unlike `AsyncStream`) is left to finish by
    /// itself and does not hold up the caller.
    ///
    /// - Parameters:
    ///   - timeout: How long to wait for a matching element.
    ///   - description: What is awaited, for the failure message (for example
    ///     `"three failed commits"`).
    ///   - predicate: The condition; called once per element, on the reading task.
    /// - Returns: The first element that satisfies `predicate`.
    /// - Throws: A `MirrorError` of kind `MirrorError.Kind.timedOut` when no element
    ///   matched in time, or when the sequence ended or failed first; its message shows the
    ///   last element seen. `MirrorError.Kind.cancelled` when the waiting task is
    ///   cancelled. An error thrown by `predicate` is wrapped in a `.timedOut` error whose
    ///   `MirrorError.underlying` is the original.
    @discardableResult
    public func waitUntil(
        timeout: Duration = .seconds(10),
        _ description: String? = nil,
        satisfies predicate: @escaping @Sendable (Element) throws -> Bool
    ) async throws(MirrorError) -> Element {
        try await firstElement(
            timeout: timeout, description, describe: { String(describing: $0) }, satisfying: predicate)
    }

    /// The first element that satisfies `predicate`, within `timeout`; see
    /// ``waitUntil(timeout:_:satisfies:)``.
    ///
    /// - Parameters:
    ///   - noun: What an element is called in the failure message.
    ///   - describe: Shows an element in the failure message.
    ///   - endingReader: Return only once the task reading the sequence has ended (for
    ///     sequences known to end promptly when that task is cancelled, so that what their
    ///     iterator holds is released when the wait returns).
    func firstElement(
        timeout: Duration,
        _ description: String?,
        noun: String = "element",
        endingReader: Bool = false,
        describe: @escaping @Sendable (Element) -> String,
        satisfying predicate: @escaping @Sendable (Element) throws -> Bool
    ) async throws(MirrorError) -> Element {
        let rendezvous = Rendezvous<Element>()
        let seen = Mutex<(last: Element?, count: Int)>((nil, 0))
        let awaited = description.map { " for \($0)" } ?? " until the condition held"

        @Sendable func lastSeen() -> String {
            let (last, count) = seen.withLock { ($0.last, $0.count) }
            guard let last else { return "no \(noun) was seen" }
            return "\(count) \(noun)\(count == 1 ? "" : "s") seen, the last one: \(describe(last))"
        }

        let sequence = self
        let reader = Task {
            do {
                for try await element in sequence {
                    seen.withLock { $0 = (element, $0.count + 1) }
                    let matches: Bool
                    do {
                        matches = try predicate(element)
                    } catch {
                        rendezvous.resolve(.failure(MirrorError(
                            .timedOut, "the condition threw \(error) while waiting\(awaited); \(lastSeen())",
                            underlying: error)))
                        return
                    }
                    if matches {
                        rendezvous.resolve(.success(element))
                        return
                    }
                    if rendezvous.isResolved { return }
                }
                rendezvous.resolve(.failure(MirrorError(
                    .timedOut, "the sequence ended while waiting\(awaited); \(lastSeen())")))
            } catch {
                rendezvous.resolve(.failure(MirrorError(
                    .timedOut, "the sequence failed while waiting\(awaited): \(error); \(lastSeen())",
                    underlying: error)))
            }
        }
        rendezvous.onResolve { reader.cancel() }
        let result: Result<Element, MirrorError>
        do {
            result = .success(try await rendezvous.value(timeout: timeout) {
                MirrorError(.timedOut, "timed out after \(timeout) waiting\(awaited); \(lastSeen())")
            })
        } catch {
            result = .failure(error)
        }
        if endingReader { await reader.value }
        return try result.get()
    }
}
