import Synchronization

/// A live subscription to a zone's changes, returned by
/// ``RecordDatabase/subscribe(to:handler:)``.
///
/// The subscription lasts until ``cancel()`` is called or it is deallocated, whichever
/// comes first; after that its handler is not called again.
public final class DatabaseSubscription: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    /// Creates a subscription that runs `onCancel` once when it ends.
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
    }

    /// Ends the subscription. Calling it again does nothing.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { onCancel.withLock { $0 == nil } }

    deinit { cancel() }
}
