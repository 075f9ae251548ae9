import Foundation

/// Where a ``ReplicatedDatabase`` stands with its remote: reachable or not, how many local
/// changes wait for it, and when everything last went through.
///
/// Read it with ``ReplicatedDatabase/status``, or follow it with
/// ``ReplicatedDatabase/statusUpdates``, which yields a new value only when it changes:
///
/// ```swift
/// for await status in replicated.statusUpdates {
///     banner.text = status.phase == .offline
///         ? "Offline — \(status.pendingChanges) changes will be sent later"
///         : "Up to date"
/// }
/// ```
public struct ReplicationStatus: Sendable, Hashable {
    /// Whether the remote is reachable and the replica is exchanging changes with it.
    public enum Phase: Sendable, Hashable, CustomStringConvertible {
        /// The remote accepted the last exchange; nothing is being exchanged now.
        case online
        /// Local changes are being pushed or remote changes pulled (also the phase of a new
        /// instance until its first exchange ends).
        case syncing
        /// The last exchange failed because the remote could not be reached. Changes keep
        /// being made and stored locally; the exchange is retried with backoff.
        case offline

        /// The case's name.
        public var description: String {
            switch self {
            case .online: "online"
            case .syncing: "syncing"
            case .offline: "offline"
            }
        }
    }

    /// Whether the remote is reachable and being synchronised with.
    public var phase: Phase
    /// The local changes stored in the replica that the remote has not accepted yet, in the
    /// zones this instance synchronises (held ones included).
    public var pendingChanges: Int
    /// The pending changes the remote refused for a reason retrying cannot fix, or whose
    /// conflict no open mirror can settle. They stay in the replica, are reported once each
    /// (see ``ReplicatedDatabase/problems``), and are tried again when their record changes
    /// or at ``ReplicatedDatabase/synchronize()``.
    public var heldChanges: Int
    /// When an exchange with the remote last completed: every pending change that was not
    /// held pushed, and the remote's changes pulled. `nil` until the first one.
    public var lastSuccessfulSync: Date?

    /// Creates a status.
    ///
    /// - Parameters:
    ///   - phase: Whether the remote is reachable and being synchronised with.
    ///   - pendingChanges: The local changes the remote has not accepted yet.
    ///   - heldChanges: The pending changes that are held.
    ///   - lastSuccessfulSync: When an exchange with the remote last completed.
    public init(phase: Phase, pendingChanges: Int, heldChanges: Int, lastSuccessfulSync: Date?) {
        self.phase = phase
        self.pendingChanges = pendingChanges
        self.heldChanges = heldChanges
        self.lastSuccessfulSync = lastSuccessfulSync
    }
}
