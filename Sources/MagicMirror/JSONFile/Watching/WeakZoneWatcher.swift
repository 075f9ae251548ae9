import Foundation
import Synchronization

/// A weak reference to a ``JSONFileZoneWatcher``, set once right after it is made.
final class WeakZoneWatcher: Sendable {
    private let reference = Mutex<WeakReference>(WeakReference())

    private struct WeakReference {
        weak var watcher: JSONFileZoneWatcher?
    }

    var watcher: JSONFileZoneWatcher? {
        get { reference.withLock { $0.watcher } }
        set { reference.withLock { $0.watcher = newValue } }
    }
}
