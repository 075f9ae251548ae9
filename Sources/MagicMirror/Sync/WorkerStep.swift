/// What one of a mirror's background tasks (the puller, the committer) does next.
enum WorkerStep<Work> {
    /// Do this now.
    case run(Work)
    /// Nothing to do before `until` (or a signal; `nil`: only a signal).
    case wait(until: ContinuousClock.Instant?)
}
