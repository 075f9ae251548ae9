import Foundation
import Synchronization

/// The problems an engine found in its files (corrupt entries, failed background work):
/// each is kept and posted as a `.mirrorError` notification once per key.
///
/// Both the keys and the kept problems are bounded (``OncePerKey/defaultCapacity``): the
/// oldest are dropped first.
final class JSONFileProblems: Sendable {
    private struct State {
        var list: [MirrorError] = []
        var reported = OncePerKey<String>()
    }

    private let state = Mutex(State())
    private let center: NotificationCenter

    /// An empty log that posts on `center`.
    init(center: NotificationCenter = .default) {
        self.center = center
    }

    /// The problems reported so far, oldest first.
    var all: [MirrorError] { state.withLock { $0.list } }

    /// Whether a problem with this key was reported.
    func wasReported(_ key: String) -> Bool { state.withLock { $0.reported.contains(key) } }

    /// Keeps and posts `error`, unless a problem with the same key was reported before.
    func report(_ error: MirrorError, key: String) {
        let isNew = state.withLock { state -> Bool in
            guard state.reported.insert(key) else { return false }
            state.list.append(error)
            if state.list.count > state.reported.capacity { state.list.removeFirst() }
            return true
        }
        if isNew { center.post(name: .mirrorError, object: error) }
    }
}
