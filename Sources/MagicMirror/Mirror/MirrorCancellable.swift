import Synchronization

/// Keeps something going until it is cancelled or deallocated: a database subscription
/// (``RecordDatabase/subscribe(to:handler:)``) or an observation of a mirror
/// (``Mirror/observe(_:)``).
///
/// Keep it as long as you want the calls; calling ``cancel()`` or letting it go ends them,
/// whichever comes first. After that, the handler it stands for is not called again once a
/// call in progress returns.
///
/// A ``RecordDatabase`` of your own returns one from `subscribe(to:handler:)`, made with the
/// action that stops its deliveries:
///
/// ```swift
/// // Fragment: inside a RecordDatabase's subscribe(to:handler:)
/// let number = subscribers.add(handler)
/// return MirrorCancellable { [subscribers] in subscribers.remove(number) }
/// ```
public final class MirrorCancellable: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    /// Creates a cancellable that runs `onCancel` once, when it is cancelled or deallocated.
    ///
    /// - Parameter onCancel: What ends the work; called at most once, on the thread that
    ///   cancels or releases the cancellable.
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
    }

    /// Ends what this cancellable stands for. Calling it again does nothing.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    /// Whether ``cancel()`` was called (or the action otherwise already ran).
    public var isCancelled: Bool { onCancel.withLock { $0 == nil } }

    deinit { cancel() }
}
