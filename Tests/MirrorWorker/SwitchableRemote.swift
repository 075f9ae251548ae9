import Foundation
import MagicMirror

/// A JSON-file database in a directory of its own standing in for a database server that
/// several machines reach, with an off switch: while the file `offlineMarker` exists, every
/// read and commit throws `MirrorError.Kind.unavailable`, as when the server cannot be reached.
///
/// Several worker processes (and the test) open the same directory, so they share one
/// "server", the honest cross-process stand-in for a remote (an `InMemoryDatabase` lives in
/// one process only).
final class SwitchableRemote: RecordDatabase {
    let base: JSONFileDatabase
    let offlineMarker: String

    init(directory: URL, offlineMarker: String) throws {
        self.base = try JSONFileDatabase(directory: directory)
        self.offlineMarker = offlineMarker
    }

    var identifier: String { base.identifier }
    var writerID: String { base.writerID }

    private func reach(_ zone: ZoneID) throws {
        guard FileManager.default.fileExists(atPath: offlineMarker) else { return }
        throw MirrorError(
            .unavailable, "the stand-in server is switched off (\(offlineMarker) exists)",
            recordType: zone.recordType, scope: zone.scope)
    }

    func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try reach(zone)
        return try await base.commit(operations, to: zone)
    }

    func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try reach(zone)
        return try await base.fetchAll(in: zone)
    }

    func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try reach(zone)
        return try await base.fetch(recordIDs, in: zone)
    }

    func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try reach(zone)
        return try await base.changes(in: zone, since: token)
    }

    func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try reach(zone)
        return try await base.currentToken(in: zone)
    }

    func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try base.subscribe(to: zone, handler: handler)
    }
}
