extension Mirror {
    /// Calls `handler` on the main actor with the current records at once, then with a new
    /// snapshot each time they have changed, until the returned ``MirrorCancellable`` is
    /// cancelled or deallocated, or the mirror is: the way for UI code to follow a mirror.
    ///
    /// It is ``observe(_:)`` with every call on the main actor: the first before it returns,
    /// the later ones coalesced, one at a time, whoever made the change (this process on any
    /// thread, another process). A mirror's ``LiveView``s change in the same step as its
    /// records, so reading them in `handler` shows them as they are with the records.
    ///
    /// For example, a model for SwiftUI (see <doc:ApplePlatforms>):
    ///
    /// ```swift
    /// observation = mirror.observeOnMainActor { [weak self] todos in
    ///     self?.todos = todos
    /// }
    /// ```
    ///
    /// - Parameter handler: Gets the records, on the main actor; must not block for long.
    /// - Returns: Keep it as long as you want calls.
    @MainActor
    public func observeOnMainActor(_ handler: @escaping @MainActor ([Record]) -> Void) -> MirrorCancellable {
        guard let (number, wakeup, first) = addRecordsObserver() else { return MirrorCancellable {} }
        handler(first)
        let task = Task { @MainActor [weak self] in
            var delivered = first
            while true {
                await wakeup.wait()
                guard !Task.isCancelled, let records = self?.currentRecords() else { return }
                if records != delivered {
                    delivered = records
                    handler(records)
                }
            }
        }
        return recordsObservation(number, task)
    }
}
