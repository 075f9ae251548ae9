import Foundation
import Observation
import Synchronization

// A private mirror opened without a user follows a UserSession: on a user switch it moves
// to the new user's zone at once, and hands the old user's uncommitted changes to a
// "finisher", a mirror of the old zone that commits them there.

/// What a ``Mirror`` needs to follow a ``UserSession``: the session, its observer, and the
/// mirrors that finish committing the changes of users the mirror switched away from.
final class MirrorAccountLink<Record: Recordable>: Sendable {
    private struct State {
        var observer: SessionObserver?
        /// The mirrors finishing the commits of earlier zones, by the number of user switches
        /// before those zones; kept until they have nothing left to commit.
        var finishers: [Int: Mirror<Record>] = [:]
    }

    /// The session followed, or `nil` when the mirror holds one zone for good.
    let session: UserSession?
    /// Held while a switch is applied, so that switches apply one at a time. Taken before
    /// ``state``.
    let switching = Mutex(())
    private let state = Mutex(State())

    init(following session: UserSession?) {
        self.session = session
    }

    deinit {
        if let session, let observer = state.withLock({ $0.observer }) {
            session.notificationCenter.removeObserver(observer.token)
        }
    }

    /// Keeps the observer of the session's notifications until deallocated.
    func keep(_ token: SessionObserver) {
        state.withLock { $0.observer = token }
    }

    /// The mirror finishing the changes made after `zoneSwitches` user switches, if any.
    func finisher(after zoneSwitches: Int) -> Mirror<Record>? {
        state.withLock { $0.finishers[zoneSwitches] }
    }

    /// Runs `body` with the finishers locked, so that a commit outcome that finds the
    /// mirror's engine moved to a new zone also finds the finisher of the old one. `body`
    /// records a new finisher with `add`, which also forgets those that committed
    /// everything.
    fileprivate func withFinishersLocked<Result>(
        _ body: (_ add: (Mirror<Record>, Int) -> Void) -> Result
    ) -> Result {
        state.withLock { state in
            body { finisher, zoneSwitches in
                state.finishers = state.finishers.filter { $0.value.hasPendingChanges }
                state.finishers[zoneSwitches] = finisher
            }
        }
    }

    /// Cancels the flush numbered `number` if a finisher holds it.
    func cancelFlushWaiter(_ number: Int) {
        for finisher in state.withLock({ Array($0.finishers.values) })
        where finisher.core.withLock({ $0.cancelFlushWaiter(number) }) {
            return
        }
    }

    /// The finishers with changes still to commit (``Mirror/flush()`` waits for them too).
    func unfinishedFinishers() -> [Mirror<Record>] {
        state.withLock { state in
            state.finishers = state.finishers.filter { $0.value.hasPendingChanges }
            return state.finishers.sorted { $0.key < $1.key }.map(\.value)
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
            let oldZone = zone
            let newZone = oldZone.scope == .shared
                ? ZoneID.shared(Record.recordType, user: session.user.name)
                : ZoneID.private(Record.recordType, user: session.user.name)
            guard newZone != oldZone else { return }
            // Join the new zone's hub first, so that nothing committed to it from now on is
            // missed. If that fails, the switch still happens (the old user's records must
            // not stay on show); the error is reported and pulls still load the zone.
            var newMembership: ZoneSubscriptionMembership?
            var joinError: MirrorError?
            do {
                newMembership = try ZoneSubscriptions.join(self, database: database, zone: newZone)
            } catch {
                joinError = mirrorError(error, while: "subscribing to \(newZone)", in: newZone)
            }
            registrar.willSet(self, keyPath: dataModelKey)
            let oldMembership = account.withFinishersLocked { add in
                let (old, left) = core.withLock { engine -> (SyncEngine<Record>, ZoneSubscriptionMembership?) in
                    let left = engine.subscription
                    let old = engine.startOver(in: newZone)
                    engine.subscription = newMembership
                    if let joinError { engine.report(joinError) }
                    return (old, left)
                }
                if !old.queue.isEmpty {
                    add(Mirror(finishing: old, of: self), old.zoneSwitches)
                }
                return left
            }
            oldMembership?.leave()
            let effects = core.withLock { $0.drain(owner: self) }
            registrar.didSet(self, keyPath: dataModelKey)
            deliver(effects)
            pullWakeup.signal()
            commitWakeup.signal()
        }
    }
}
