import Foundation
import Synchronization

/// How the notifications of the databases that mirrors follow are published in this process.
///
/// The mirrors of one zone share one subscription to their database. Every
/// ``RemoteNotification`` that subscription delivers (for the JSON-file database: each
/// commit another process made, noticed by its directory watcher) wakes the zone's mirrors
/// directly, which pull the changes since their token; so cross-process sync needs no code.
/// The notification is then handed to ``converter``, which by default posts the local
/// ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification on
/// `NotificationCenter.default` for anyone who observes it.
///
/// The mirrors also listen there, for payloads that arrive by another route:
///
/// ```swift
/// // A payload received from a push service, a socket or a message queue:
/// MirrorNotificationConverter().convertToLocal(from: payload)
/// ```
///
/// Replace ``converter`` to see every database notification, for example to forward it to
/// other machines:
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
/// > Note: The converter is the public face, not the link the mirrors depend on: a
/// > converter that posts elsewhere, or posts nothing, keeps the notifications from
/// > observers of `NotificationCenter.default`, not the changes from the mirrors. A
/// > notification the mirrors already had (its token is not newer) wakes none of them.
public enum MirrorNotificationRouting {
    private static let storage = Mutex<any NotificationConverter & Sendable>(MirrorNotificationConverter())

    /// The converter every database notification the mirrors of this process receive is
    /// handed to, after it woke them. Default: a ``MirrorNotificationConverter`` posting on
    /// `NotificationCenter.default`.
    ///
    /// A new converter applies to the notifications delivered after it is set. It is called
    /// on the database's thread (for the JSON-file database, its watcher's): keep it short.
    public static var converter: any NotificationConverter & Sendable {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Hands a database's notification to ``converter`` (the mirrors already have it).
    static func route(_ notification: RemoteNotification) {
        let converter = self.converter
        // The mirrors' own observer of `NotificationCenter.default` skips what this posts.
        $routing.withValue(notification) {
            if let standard = converter as? MirrorNotificationConverter {
                // No need to go through the userInfo form.
                standard.convertToLocal(notification)
            } else {
                _ = converter.convertToLocal(from: notification.userInfo)
            }
        }
    }

    /// The database notification being routed on this thread, if any: the local
    /// notification posted for it (observers run on the posting thread) is one the mirrors
    /// already had, which their observer drops without looking further.
    @TaskLocal static var routing: RemoteNotification?

    /// Whether `change` is the notification being routed on this thread (its zone and token;
    /// not its record ids, which may be many).
    static func isRouting(_ change: RemoteNotification) -> Bool {
        guard let routing else { return false }
        return routing.token == change.token && routing.zone == change.zone
            && routing.databaseIdentifier == change.databaseIdentifier
    }
}
