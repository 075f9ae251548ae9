import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting

/// `mirror-worker overlapping-read records|pending`: reads a mirror from inside a
/// `removeAll(where:)` predicate on its `dataModel` — its records (which stops the program
/// with the overlapping-access message) or its pending changes (which works) — and prints
/// `survived <count>` when the program goes on.
enum OverlappingReadCommand {
    static func run(_ arguments: [String]) async throws {
        let mirror = try await Mirror<EditRecord>(database: InMemoryDatabase())
        mirror.dataModel.append(EditRecord(id: "a", owner: "reader"))
        let readRecords = arguments.first == "records"
        // The predicate keeps every record whatever it reads: whether the append is still
        // pending depends on the background commit's timing, so it must not decide anything.
        mirror.dataModel.removeAll { _ in
            if readRecords { _ = mirror.dataModel.isEmpty } else { _ = mirror.pendingChanges.count }
            return false
        }
        print("survived \(mirror.dataModel.count)")
    }
}
