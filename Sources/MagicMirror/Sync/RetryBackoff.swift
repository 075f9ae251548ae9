/// When to try again a step that failed transiently (a commit, a pull): after the n-th
/// failure in a row, ``MirrorConfiguration/delay(afterFailures:)``, doubling up to the
/// configuration's maximum.
struct RetryBackoff: Sendable, Equatable {
    /// Failures in a row since the last success.
    private(set) var failures = 0
    /// When the next try may start; `nil`: at once.
    private(set) var retryAt: ContinuousClock.Instant?

    /// The instant to wait for before trying, or `nil` when a try may start `now`.
    func deadline(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard let retryAt, now < retryAt else { return nil }
        return retryAt
    }

    /// Counts a failure and schedules the next try.
    mutating func failed(now: ContinuousClock.Instant, configuration: MirrorConfiguration) {
        failures += 1
        retryAt = now.advanced(by: configuration.delay(afterFailures: failures))
    }

    /// A success: the next failure waits the shortest delay again.
    mutating func succeeded() {
        failures = 0
        retryAt = nil
    }

    /// Lets the next try start at once (a `flush()` asked), keeping the count of failures.
    mutating func retryNow() {
        retryAt = nil
    }
}
