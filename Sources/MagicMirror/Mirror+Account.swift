import Foundation
import Observation
import Synchronization

// A private mirror opened without a user follows a UserSession: on a user switch it moves
// to the new user's zone at once, and hands the old user's uncommitted changes to an
// "heir", a mirror of the old zone that commits them there.

/// What a ``Mirror`` needs to follow a ``UserSession``: the session, its observer, and the
/// heirs that commit the changes of users the mirror switched away from.
final class MirrorAccountLink<Record: Recordable>: Sendable {
    /// The session followed, or `nil` when the mirror holds one zone for good.
    let session: UserSession?
    private let observer = Mutex<SessionObserver?>(nil)
    /// Held while a switch is applied, so that switches apply one at a time.
    let switching = Mutex(())
    /// The mirrors committing the changes of earlier zones, by the epoch of those changes;
    /// kept until they have nothing left to commit.
    private let heirs = Mutex<[Int: Mirror<Record>]>([:])

    init(following session: UserSession?) {
        self.session = session
    }

    deinit {
        if let session, let observer = observer.withLock({ $0 }) {
            session.notificationCenter.removeObserver(observer.token)
        }
    }

    /// Keeps the observer of the session's notifications until deallocated.
    func keep(_ token: SessionObserver) {
        observer.withLock { $0 = token }
    }

    /// The heir holding the changes of `epoch`, if any.
    func heir(of epoch: Int) -> Mirror<Record>? {
        heirs.withLock { $0[epoch] }
    }

    /// Records `heir` as the holder of the changes of `epoch` in `heirs` (inside
    /// ``withHeirsLocked(_:)``), and forgets the heirs that committed everything.
    fileprivate func add(_ heir: Mirror<Record>, for epoch: Int, to heirs: inout [Int: Mirror<Record>]) {
        heirs = heirs.filter { $0.value.hasPendingChanges }
        heirs[epoch] = heir
    }

    /// Runs `body` with the heirs locked, so that a commit outcome that finds the mirror's
    /// state moved to a new zone also finds the heir of the old one.
    fileprivate func withHeirsLocked<Result>(_ body: (inout [Int: Mirror<Record>]) -> Result) -> Result {
        heirs.withLock { body(&$0) }
    }

    /// Cancels the flush numbered `number` if an heir holds it.
    func cancelFlushWaiter(_ number: Int) {
        for heir in heirs.withLock({ Array($0.values) }) where heir.core.withLock({ $0.cancelFlushWaiter(number) }) {
            return
        }
    }

    /// The heirs with changes still to commit (``Mirror/flush()`` waits for them too).
    func unfinishedHeirs() -> [Mirror<Record>] {
        heirs.withLock { heirs in
            heirs = heirs.filter { $0.value.hasPendingChanges }
            return heirs.sorted { $0.key < $1.key }.map(\.value)
        }
    }
}

/// The token of a mirror's observer of its session's notifications.
final class SessionObserver: @unchecked Sendable {
    // @unchecked Sendable: the token is immutable and only handed to
    // `NotificationCenter.removeObserver`, which may be called from any thread.
    let token: any NSObjectProtocol

    init(_ token: any NSObjectProtocol) { self.token = token }
}

extension Mirror {
    /// Starts following the user session, when the mirror follows one. Called at the end of
    /// the initializer.
    func followUserSession() {
        guard let session = account.session else { return }
        let token = session.notificationCenter.addObserver(
            forName: .mirrorAccountChanged, object: session, queue: nil
        ) { [weak self] _ in
            self?.switchToCurrentUser()
        }
        account.keep(SessionObserver(token))
        // A switch made while the mirror was loading.
        switchToCurrentUser()
    }

    /// Moves the mirror to the private zone of its session's current user, if it is not
    /// there already.
    ///
    /// Runs on the thread that switched users (it observes the session's notification), so
    /// that when ``UserSession/switchUser(to:)`` returns, ``dataModel`` no longer shows the
    /// old user's records and changes made from then on belong to the new user. It reads the
    /// session's current user rather than the notification's, so that switches observed late
    /// or twice still end on the latest user.
    func switchToCurrentUser() {
        guard let session = account.session else { return }
        account.switching.withLock { _ in
            let newZone = ZoneID.private(Record.recordType, user: session.user.name)
            let oldZone = zone
            guard newZone != oldZone else { return }
            // Join the new zone's hub first, so that nothing committed to it from now on is
            // missed. If that fails, the switch still happens (the old user's records must
            // not stay on show); the error is reported and pulls still load the zone.
            var newMembership: ZoneHubMembership?
            var joinError: MirrorError?
            do {
                newMembership = try ZoneHub.join(self, database: database, zone: newZone)
            } catch {
                joinError = mirrorError(error, while: "subscribing to \(newZone)")
            }
            registrar.willSet(self, keyPath: \.dataModel)
            account.withHeirsLocked { heirs in
                let old = core.withLock { state -> MirrorState<Record> in
                    let old = state.startOver(in: newZone)
                    if let joinError { state.report(joinError) }
                    return old
                }
                currentZone.withLock { $0 = newZone }
                if old.hasPendingChanges {
                    account.add(Mirror(heirOf: self, state: old), for: old.epoch, to: &heirs)
                }
            }
            let oldMembership = membership.withLock { membership in
                defer { membership = newMembership }
                return membership
            }
            oldMembership?.leave()
            let effects = core.withLock { $0.drain(owner: self) }
            registrar.didSet(self, keyPath: \.dataModel)
            deliver(effects)
            pullWakeup.signal()
            commitWakeup.signal()
        }
    }
}
