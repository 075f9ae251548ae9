import Foundation

/// Turns a received remote-notification payload into the local notification that mirrors
/// apply.
///
/// This is MagicCloud's `MCNotificationConverter` shape. Changes by other processes on the
/// same machine reach every mirror with no code from you (a database's own notifications
/// wake the mirrors directly, then go through ``MirrorNotificationRouting/converter``). When your app receives payloads by another route — a push
/// service, a socket, a message queue carrying ``RemoteNotification/userInfo`` or
/// ``RemoteNotification/jsonData()`` from another machine — hand each one to a converter:
///
/// ```swift
/// let converter = MirrorNotificationConverter()
///
/// func didReceive(_ payload: [AnyHashable: Any]) {
///     if !converter.convertToLocal(from: payload) {
///         handleOtherPayload(payload)  // not MagicMirror's
///     }
/// }
/// ```
///
/// A type of yours can conform with no code at all and post on `NotificationCenter.default`,
/// as in MagicCloud:
///
/// ```swift
/// extension AppDelegate: NotificationConverter {}
/// ```
///
/// Implementations must post at most one local notification per payload and return `false`,
/// posting nothing, for a payload that is not a MagicMirror ``RemoteNotification``.
/// Notifications are hints: a mirror that gets one pulls the changes since its own token,
/// so a payload that arrives twice, late or out of order does no harm.
public protocol NotificationConverter {
    /// Posts the local ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification for a
    /// MagicMirror payload.
    ///
    /// - Parameter userInfo: A received payload, as made by ``RemoteNotification/userInfo``
    ///   (or by `JSONSerialization` from ``RemoteNotification/jsonData()``).
    /// - Returns: `true` when the payload was MagicMirror's and its local notification was
    ///   posted; `false`, with nothing posted, for any other payload (including a malformed
    ///   one).
    func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool
}

extension NotificationConverter {
    /// Posts the local notification on `NotificationCenter.default`; see
    /// ``MirrorNotificationConverter/convertToLocal(from:)``.
    public func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool {
        MirrorNotificationConverter().convertToLocal(from: userInfo)
    }
}

/// The standard ``NotificationConverter``: posts each MagicMirror payload as a
/// ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification on a notification
/// center.
///
/// The posted notification's `object` is the ``RemoteNotification`` and its `userInfo` the
/// payload's ``RemoteNotification/userInfo``. Observers register with a `nil` object (the
/// object is a value, so matching by identity does not apply) and select by database
/// identifier and zone:
///
/// ```swift
/// NotificationCenter.default.addObserver(
///     forName: .mirrorRemoteChange, object: nil, queue: nil
/// ) { notification in
///     guard let change = notification.object as? RemoteNotification,
///           change.recordType == "Todo" else { return }
///     // pull the changes since the last token
/// }
/// ```
///
/// > Important: Observers run synchronously on the thread that called
/// > ``convertToLocal(from:)``; keep them short.
public struct MirrorNotificationConverter: NotificationConverter, Sendable {
    /// The center the local notifications are posted on.
    public let notificationCenter: NotificationCenter

    /// Creates a converter that posts on `notificationCenter`.
    ///
    /// - Parameter notificationCenter: Where to post; `NotificationCenter.default` by
    ///   default, which is where mirrors listen unless told otherwise.
    public init(notificationCenter: NotificationCenter = .default) {
        self.notificationCenter = notificationCenter
    }

    /// Posts one ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification for a
    /// MagicMirror payload.
    ///
    /// - Parameter userInfo: A received payload.
    /// - Returns: `true` when it was MagicMirror's and was posted; `false`, with nothing
    ///   posted, for a foreign or malformed payload.
    public func convertToLocal(from userInfo: [AnyHashable: Any]) -> Bool {
        guard let notification = RemoteNotification(userInfo: userInfo) else { return false }
        post(notification)
        return true
    }

    /// Posts one ``Foundation/NSNotification/Name/mirrorRemoteChange`` notification for a
    /// notification already decoded (a database's watcher uses this).
    ///
    /// - Parameter notification: The change to announce.
    public func convertToLocal(_ notification: RemoteNotification) {
        post(notification)
    }

    private func post(_ notification: RemoteNotification) {
        notificationCenter.post(
            name: .mirrorRemoteChange, object: notification, userInfo: notification.userInfo)
    }
}

extension Notification.Name {
    /// Posted by a ``NotificationConverter`` for every remote change it converts; the
    /// notification's `object` is the ``RemoteNotification``.
    ///
    /// Mirrors of the notification's record type pull the changes since their token when
    /// they receive it.
    public static let mirrorRemoteChange = Notification.Name("MagicMirror.mirrorRemoteChange")

    /// Posted when the current user changes (see ``UserSession/switchUser(to:)``); the
    /// notification's `object` is the ``UserSession`` and its `userInfo` holds the
    /// ``UserSession/Change`` under ``UserSession/Change/userInfoKey``.
    ///
    /// Private mirrors of that session reload for the new user when they receive it.
    public static let mirrorAccountChanged = Notification.Name("MagicMirror.mirrorAccountChanged")
}
