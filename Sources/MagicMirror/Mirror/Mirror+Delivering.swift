import Foundation
import Observation
import Synchronization

// After each locked section: what the engine handed out is carried out with the lock released.

extension Mirror {
    /// Posts errors and wakes observers after a locked section.
    ///
    /// An error that stands for a bad stored entry (a record that does not decode), which
    /// every mirror of its zone and type finds and reports on its own ``errors()`` and
    /// ``lastError``, is posted once per process: it is one failure.
    func deliver(_ effects: SyncEngine<Record>.Effects) {
        let delivered = effects.delivered
        if !delivered.reports.isEmpty {
            registrar.willSet(self, keyPath: lastErrorKey)
            registrar.didSet(self, keyPath: lastErrorKey)
            var skipped: [MirrorError] = []
            for report in delivered.reports {
                if let entry = report.entry {
                    let key = "\(database.identifier)|\(entry)"
                    guard postedEntryFailures.withLock({ $0.insert(key) }) else { continue }
                    if report.error.kind == .decodingFailed { skipped.append(report.error) }
                }
                NotificationCenter.default.post(name: .mirrorError, object: report.error)
            }
            if !skipped.isEmpty { logSkipped(skipped) }
        }
        for observer in delivered.observers { observer.signal() }
        for (view, upTo) in effects.liveViews { view.applyPending(upTo: upTo) }
        for observer in delivered.stateObservers { observer.call() }
    }

    /// Writes the line about records skipped in one delivery to the configured log.
    private func logSkipped(_ skipped: [MirrorError]) {
        let (log, zone) = core.withLock { ($0.configuration.undecodableRecords.log, $0.zone) }
        guard let log, let line = UndecodableRecordPolicy.line(
            zone: zone, recordType: "\(Record.self)", skipped: skipped)
        else { return }
        log(line)
    }
}

/// The bad stored entries whose failure was posted in this process (see `Mirror.deliver(_:)`).
private let postedEntryFailures = Mutex(OncePerKey<String>())
