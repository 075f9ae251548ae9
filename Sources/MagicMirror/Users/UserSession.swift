import Foundation
import Synchronization

/// The current user of a process (or of one part of it), which private mirrors follow.
///
/// ``shared`` starts as the operating-system account running the process
/// (``MirrorUser/processOwner()``). Switching users updates ``user`` and posts one
/// ``Foundation/NSNotification/Name/mirrorAccountChanged`` notification; private mirrors of
/// the session then reload from the new user's private scope.
///
/// ```swift
/// let alice = try MirrorUser(name: "alice")
/// UserSession.shared.switchUser(to: alice)
/// ```
///
/// Make your own session to give one part of a program (or one test) its own current user
/// and notification center.
///
/// > Important: Switches are applied and announced in one order: every observer sees the
/// > changes in the order they were made, and each change's ``Change/previous`` is the one
/// > before's ``Change/current``. Do not switch users from a
/// > ``Foundation/NSNotification/Name/mirrorAccountChanged`` observer.
public final class UserSession: Sendable {
    /// A change of the current user.
    public struct Change: Hashable, Sendable {
        /// The user before the switch.
        public var previous: MirrorUser
        /// The user after the switch.
        public var current: MirrorUser

        /// Creates a change.
        public init(previous: MirrorUser, current: MirrorUser) {
            self.previous = previous
            self.current = current
        }

        /// The key of the change in a ``Foundation/NSNotification/Name/mirrorAccountChanged``
        /// notification's `userInfo`.
        public static let userInfoKey = "change"

        /// The change a ``Foundation/NSNotification/Name/mirrorAccountChanged`` notification
        /// announces, or `nil` for another notification.
        public init?(_ notification: Notification) {
            guard notification.name == .mirrorAccountChanged,
                  let change = notification.userInfo?[Self.userInfoKey] as? Change
            else { return nil }
            self = change
        }
    }

    /// The session of the whole process, used by mirrors unless they are given another.
    public static let shared = UserSession()

    /// Where ``Foundation/NSNotification/Name/mirrorAccountChanged`` is posted.
    public let notificationCenter: NotificationCenter

    private let state: Mutex<MirrorUser>
    /// Held while a switch is applied and announced, so announcements keep the order of
    /// the switches.
    private let switching = Mutex(())
    private let streams = Mutex<(next: Int, continuations: [Int: AsyncStream<Change>.Continuation])>((0, [:]))

    /// Creates a session.
    ///
    /// - Parameters:
    ///   - user: The current user; the operating-system account running the process by
    ///     default.
    ///   - notificationCenter: Where to post ``Foundation/NSNotification/Name/mirrorAccountChanged``.
    public init(user: MirrorUser = .processOwner(), notificationCenter: NotificationCenter = .default) {
        state = Mutex(user)
        self.notificationCenter = notificationCenter
    }

    /// The current user.
    public var user: MirrorUser { state.withLock { $0 } }

    /// Makes `user` the current user.
    ///
    /// When it differs from the current one, ``user`` changes, a
    /// ``Foundation/NSNotification/Name/mirrorAccountChanged`` notification is posted once on
    /// ``notificationCenter`` (its `object` is this session, its `userInfo` holds the
    /// ``Change`` under ``Change/userInfoKey``), and every ``changes()`` sequence yields the
    /// change. Switching to the current user does nothing.
    ///
    /// - Parameter user: The new current user.
    /// - Returns: The change, or `nil` when `user` already was the current user.
    @discardableResult
    public func switchUser(to user: MirrorUser) -> Change? {
        switching.withLock { _ in
            let change: Change? = state.withLock { current in
                guard current != user else { return nil }
                defer { current = user }
                return Change(previous: current, current: user)
            }
            guard let change else { return nil }
            for continuation in streams.withLock({ Array($0.continuations.values) }) {
                continuation.yield(change)
            }
            notificationCenter.post(
                name: .mirrorAccountChanged, object: self, userInfo: [Change.userInfoKey: change])
            return change
        }
    }

    /// The changes of the current user from now on, in order, until the sequence's
    /// consumer stops iterating.
    public func changes() -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream<Change>.makeStream()
        let key = streams.withLock { streams in
            defer { streams.next += 1 }
            streams.continuations[streams.next] = continuation
            return streams.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.streams.withLock { $0.continuations.removeValue(forKey: key) }
        }
        return stream
    }
}
