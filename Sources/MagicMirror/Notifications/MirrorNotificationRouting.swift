import Foundation
import Synchronization

/// How the notifications of the databases that mirrors follow reach those mirrors, in this
/// process.
///
/// The mirrors of one zone share one subscription to their database. Every
/// ``RemoteNotification`` that subscription delivers (for the JSON-file database: each
/// commit another process made, noticed by its directory watcher) is handed to
/// ``converter``, which posts the local ``Foundation/NSNotification/Name/mirrorRemoteChange``
/// notification on `NotificationCenter.default`. The mirrors listen there, select the
/// notifications of their database and zone, and pull the changes since their token. So
/// cross-process sync needs no code, and a payload that arrives by another route goes the
/// same way:
///
/// ```swift
/// // A payload received from a push service, a socket or a message queue:
/// MirrorNotificationConverter().convertToLocal(from: payload)
/// ```
///
/// Replace ``converter`` to see every database notification before the mirrors do, for
/// example to forward it to other machines:
///
/// ```swift
/// struct Forwarding: NotificationConverter, Sendable {
///     let channel: Channel
///     func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool {
///         channel.send(userInfo)
///         return MirrorNotificationConverter().convertToLocal(from: userInfo)
///     }
/// }
/// MirrorNotificationRouting.converter = Forwarding(channel: channel)
/// ```
///
/// > Important: Mirrors listen on `NotificationCenter.default` only. A converter that posts
/// > elsewhere, or posts nothing, keeps the changes of other processes from the mirrors
/// > (they still see their own process's changes and catch up whenever they pull).
public enum MirrorNotificationRouting {
    private static let storage = Mutex<any NotificationConverter & Sendable>(MirrorNotificationConverter())

    /// The converter every database notification for the mirrors of this process goes
    /// through. Default: a ``MirrorNotificationConverter`` posting on
    /// `NotificationCenter.default`.
    ///
    /// A new converter applies to the notifications delivered after it is set. It is called
    /// on the database's thread (for the JSON-file database, its watcher's): keep it short.
    public static var converter: any NotificationConverter & Sendable {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Hands a database's notification to ``converter``.
    package static func route(_ notification: RemoteNotification) {
        let converter = self.converter
        if let standard = converter as? MirrorNotificationConverter {
            // No need to go through the userInfo form.
            standard.convertToLocal(notification)
        } else {
            _ = converter.convertToLocal(from: notification.userInfo)
        }
    }
}
